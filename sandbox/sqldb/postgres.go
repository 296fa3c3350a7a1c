package sqldb

import (
	"context"
	"errors"
)

func newPGTemplate(ctx context.Context, schemaSQL, dataSQL string, opts Options) (backend, error) {
	return nil, errors.New("sqldb: postgres: not implemented yet")
}
