// Package configs holds the documented YAML configurations shipped with
// streamer: streamer.yaml (the reference for a real cluster) and demo.yaml
// (what `streamer demo` runs). They are embedded so the binary can run the
// demo from anywhere.
package configs

import "embed"

// FS holds every *.yaml file of this directory.
//
//go:embed *.yaml
var FS embed.FS
