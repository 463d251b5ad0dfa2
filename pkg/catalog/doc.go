// Package catalog owns which tool a model means by a name: the scheme of tool names and
// the catalog that resolves them. The parser, the executor's MCP pool, the CLI and the
// console all go through it, so a name that one of them understands, every one does.
//
// # Names
//
// A server's tool is shown to a model as "<server>__<tool>" ([ExposedName]; a server's
// prefix replaces "<server>__"), within [MaxNameLen] characters of [A-Za-z0-9_.-]. A
// model may also spell it "mcp__<server>__<tool>" (as Claude Code does) or
// "<server>::<tool>" ([Qualified], read back by [SplitAlias]), or by the bare tool name
// when one server alone has it. The vendors' APIs reject some names
// ("geometry.solve_circle_area"); [VendorNames] gives each an alias they accept
// ("geometry_solve_circle_area"), and [Unalias] reads one back. Allow-lists,
// block-lists and quiet tools are patterns read by [MatchTool].
//
// # The catalog
//
// [New] builds a [Catalog] from each server's [Tool] list, and [Catalog.Resolve] is the
// one lookup: a route, the shown name, a vendor alias, a qualified spelling, a unique
// bare name, in that order, or [ErrUnknownTool], [ErrNotAllowed] or [ErrAmbiguous]
// ([*AmbiguousError] names the candidates). What is the caller's to decide comes in
// through [Options]: routes, which tools may be called, whether tools keep names of their
// own. The executors write each backend's tools into the catalog bucket as a JSON list
// of [Tool], which the parsers read back.
package catalog
