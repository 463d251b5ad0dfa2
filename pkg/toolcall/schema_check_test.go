package toolcall

import "testing"

func TestArgumentName(t *testing.T) {
	tests := []struct{ ptr, want string }{
		{"", ""},
		{"root", ""},
		{"/properties/a", "a"},
		{"/properties/a/properties/b", "a.b"},
		{"/properties/items/items/properties/sku", "items[].sku"},
		{"/properties/a~1b", "a/b"},
		{"/properties/p/prefixItems/2", "p[2]"},
		{"/properties/m/additionalProperties", "m.*"},
		{"/properties/m/patternProperties/^x$", "m.*"},
		{"/properties/u/anyOf/1/properties/v", "u.v"},
	}
	for _, tt := range tests {
		if got := argumentName(tt.ptr); got != tt.want {
			t.Errorf("argumentName(%q) = %q, want %q", tt.ptr, got, tt.want)
		}
	}
}
