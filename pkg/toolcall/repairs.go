package toolcall

import (
	"math/bits"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
)

// The repairs of the call around its JSON, which Extract reports besides the
// repairer's ([jsonrepair.Repairs]). A Call's Repairs lists the repairer's up to
// string_arguments, then these, then the repairer's others.
const (
	RepairUnclosedTag    = "unclosed_tag"    // a final <tool_call> without </tool_call>
	RepairSchemaCoercion = "schema_coercion" // "10" → 10 where the input schema wants a number
)

// fixSet records the repairs of a call: the repairer's bits as jsonrepair.Repairs has
// them, and Extract's own two above them all.
type fixSet uint64

const (
	fixUnclosedTag    fixSet = 1 << 62
	fixSchemaCoercion fixSet = 1 << 63
	// ownFixes are Extract's own; beforeOwn the repairer's that Call.Repairs lists first.
	ownFixes  = fixUnclosedTag | fixSchemaCoercion
	beforeOwn = fixSet(jsonrepair.StringArguments<<1 - 1)
)

// names lists the repairs in s in their stable order; nil when none. The slice is the
// caller's, so it is built for each call, with one allocation of the exact size.
func (s fixSet) names() []string {
	if s == 0 {
		return nil
	}
	out := make([]string, 0, bits.OnesCount64(uint64(s)))
	out = appendRepairNames(out, s&beforeOwn)
	if s&fixUnclosedTag != 0 {
		out = append(out, RepairUnclosedTag)
	}
	if s&fixSchemaCoercion != 0 {
		out = append(out, RepairSchemaCoercion)
	}
	return appendRepairNames(out, s&^(beforeOwn|ownFixes))
}

// appendRepairNames appends the names of the repairer's repairs in s.
func appendRepairNames(out []string, s fixSet) []string {
	for ; s != 0; s &= s - 1 {
		out = append(out, jsonrepair.Repairs(s&-s).String())
	}
	return out
}
