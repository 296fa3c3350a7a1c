package model

// The rounding tolerances, for the package's external tests.
var (
	ForwardTol = forwardTol
	DotTol     = dotTol
)
