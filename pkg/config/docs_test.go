package config_test

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/pkg/config"
)

// configKeys lists every key of the configuration file, walked from the structs that
// decode it: nested sections joined with ".", a map's keys (a name of the user's) as
// "*". A struct decoded as one value of its own (a duration, a schema) has no keys.
func configKeys(t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		if t.Kind() == reflect.Map {
			path += ".*"
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "-" || !f.IsExported() || name == "" {
			continue
		}
		key := strings.TrimPrefix(path+"."+name, ".")
		*out = append(*out, key)
		configKeys(f.Type, key, out)
	}
}

// docs/configuration.md's table "Every key" lists every key the structs decode, and no
// key they do not: the reference cannot drift from the code.
func TestDocumentedKeys(t *testing.T) {
	var keys []string
	configKeys(reflect.TypeOf(config.Config{}), "", &keys)
	if len(keys) < 100 {
		t.Fatalf("walked %d keys; the configuration has more", len(keys))
	}
	page, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(page)
	i := strings.Index(text, "\n## Every key\n")
	if i < 0 {
		t.Fatal(`docs/configuration.md has no section "## Every key"`)
	}
	// The first cell of each row names one key or several, each in backticks.
	row := regexp.MustCompile("(?m)^\\| ((?:`[^`]+`(?:, )?)+) \\|")
	name := regexp.MustCompile("`([^`]+)`")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(text[i:], -1) {
		for _, n := range name.FindAllStringSubmatch(m[1], -1) {
			listed = append(listed, n[1])
		}
	}
	for _, k := range keys {
		if !slices.Contains(listed, k) {
			// A section whose every key is listed needs no row of its own.
			if isSection(k, keys) && !slices.Contains(keys, k+".*") {
				continue
			}
			t.Errorf("docs/configuration.md does not list the key %s", k)
		}
	}
	for _, k := range listed {
		if !slices.Contains(keys, k) {
			t.Errorf("docs/configuration.md lists %s, which the configuration does not have", k)
		}
	}
}

// isSection reports whether key has keys under it.
func isSection(key string, keys []string) bool {
	return slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, key+".") })
}
