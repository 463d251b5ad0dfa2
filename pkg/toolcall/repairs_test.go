package toolcall

import (
	"slices"
	"testing"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
)

// TestRepairNames holds a Call's Repairs to their order: the repairer's up to
// string_arguments, Extract's own two, the repairer's others.
func TestRepairNames(t *testing.T) {
	s := fixSet(jsonrepair.EscapedJSON|jsonrepair.TruncatedValue|jsonrepair.StringArguments|jsonrepair.CodeFence) | fixUnclosedTag | fixSchemaCoercion
	want := []string{"code_fence", "string_arguments", RepairUnclosedTag, RepairSchemaCoercion, "truncated_value", "escaped_json"}
	if got := s.names(); !slices.Equal(got, want) {
		t.Errorf("names() = %q, want %q", got, want)
	}
	if fixSet(0).names() != nil {
		t.Error("no repairs are named")
	}
	if names := jsonrepair.Repairs(ownFixes).Names(); names != nil {
		t.Errorf("Extract's own repairs share bits with the repairer's %q", names)
	}
}
