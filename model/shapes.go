package model

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

func shapeInt32(dims ...int) shapes.Shape { return shapes.Make(dtypes.Int32, dims...) }
func shapeF32(dims ...int) shapes.Shape   { return shapes.Make(dtypes.Float32, dims...) }
