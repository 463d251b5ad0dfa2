// Package version says which build of toolbus is running, from the build information Go
// embeds in every binary.
package version

import (
	"cmp"
	"fmt"
	"runtime/debug"
)

// Stamp is the version a build was stamped with (`-ldflags "-X
// github.com/toolbus/toolbus/pkg/version.Stamp=v1.2.3"`, as the Dockerfile's VERSION
// does), for builds that record no module version nor commit: an image built from a
// source tree without .git. It wins over "(devel)".
var Stamp string

// String is "<program> <module version> (commit <revision>[, modified], <date>, <go version>)";
// parts the build did not record (a `go run`, -buildvcs=false) are left out.
func String(program string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return program + " " + cmp.Or(Stamp, "(no build information)")
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = cmp.Or(Stamp, "(devel)")
	}
	var rev, when, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	out := fmt.Sprintf("%s %s (", program, v)
	if rev != "" {
		out += "commit " + rev[:min(len(rev), 12)] + modified + ", "
	}
	if when != "" {
		out += when + ", "
	}
	return out + info.GoVersion + ")"
}

// Short is the version alone, for telemetry's service.version: the module version of
// a released build, else "devel" with the commit when the build recorded one.
func Short() string {
	if Stamp != "" {
		return Stamp
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			return "devel+" + s.Value[:min(len(s.Value), 12)]
		}
	}
	return "devel"
}
