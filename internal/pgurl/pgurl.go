// Package pgurl edits PostgreSQL connection strings, in both forms pgx accepts: postgres:// (or
// postgresql://) URLs and key=value strings.
package pgurl

import (
	"net/url"
	"strings"
)

// WithSearchPath returns base with its search_path runtime parameter set to schema, so that a
// connection opened with it works in that schema alone. It fails only on a URL that does not
// parse.
func WithSearchPath(base, schema string) (string, error) {
	if !strings.HasPrefix(base, "postgres://") && !strings.HasPrefix(base, "postgresql://") {
		// A key=value connection string: a later setting overrides an earlier one.
		return base + " search_path=" + schema, nil
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
