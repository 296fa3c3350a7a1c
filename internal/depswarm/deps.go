package depswarm

import (
	_ "github.com/ardanlabs/jinja"
	_ "github.com/dlclark/regexp2"
	_ "github.com/expr-lang/expr"
	_ "github.com/gomlx/gomlx/backends/simplego"
	_ "github.com/gomlx/gomlx/pkg/core/graph"
	_ "github.com/gomlx/gomlx/pkg/ml/context"
	_ "github.com/gomlx/gomlx/pkg/ml/train/optimizers"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/pkoukk/tiktoken-go"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/text/unicode/norm"
	_ "gopkg.in/yaml.v3"
	_ "modernc.org/sqlite"
)
