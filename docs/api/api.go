// Package api carries the HTTP API's reference, openapi.yaml beside this file, into the binary,
// so that the server serves the very document it was built with at GET /api/v1/openapi.yaml.
package api

import "embed"

//go:embed openapi.yaml
var files embed.FS

// OpenAPI returns the OpenAPI document: a copy, which the caller may keep and change.
func OpenAPI() []byte {
	b, err := files.ReadFile("openapi.yaml")
	if err != nil {
		panic("docs/api: openapi.yaml is not embedded: " + err.Error()) // a build without it is broken
	}
	return b
}
