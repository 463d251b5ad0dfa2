package messages

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// A response is not a JSON message: its body is the model's raw text, so any NATS client
// can publish one. Its id and conversation come from headers and the subject.

// ToolCall is one call the parser found in a response. It travels on [CallSubject] with
// Nats-Msg-Id set to its ID.
type ToolCall struct {
	// ID is "<conversation>/<response id>/<index>" ([CallID]), unique per call.
	ID           string `json:"id"`
	ResponseID   string `json:"response_id"`
	Conversation string `json:"conversation"`
	Index        int    `json:"index"`
	Count        int    `json:"count"`
	// Next is the index of the first call of the response's next segment, or 0 when the
	// call is in the last one. A response's calls run segment by segment, in order (a
	// segment is one call, or a run of calls safe to run together); the formatter
	// releases the next segment once every call before it is answered.
	Next int    `json:"next,omitempty"`
	Tool string `json:"tool"`
	// ModelID is the call's id as the model's API gave it (OpenAI's tool_call id,
	// Anthropic's tool_use id, Gemini's functionCall id, Bedrock's toolUseId, a text
	// format's own: Kimi K2's functions.NAME:0, Mistral's [CALL_ID]), or, for a call
	// written without one, [GeneratedCallID]. The result and the output carry it back
	// (OutputResult.CallID), and a native next turn answers the call by it.
	ModelID string `json:"model_id,omitempty"`
	// OutputFormat, when set, is the API whose native next turn the response's output
	// carries beside its text (Output.Native): the response's Toolbus-Output-Format
	// header, else the configuration's default for its tenant.
	OutputFormat string `json:"output_format,omitempty"`
	// Arguments is a JSON object.
	Arguments json.RawMessage `json:"arguments"`
	// Repairs lists what the parser changed to make the call's JSON valid.
	Repairs []string `json:"repairs,omitempty"`
	// Deadline, when set, is when the call is answered with timeout.
	Deadline time.Time `json:"deadline,omitzero"`
	// Error, when set, is the parser's verdict: the call could not be read, or its
	// arguments do not fit the tool's schema. The executor answers with it and runs
	// nothing.
	Error *ResultError `json:"error,omitempty"`
	// Stream marks a call of a streamed response, sent before the response ended: Count
	// and Next are 0, and the response's stream state (package order) says what runs
	// next.
	Stream bool `json:"stream,omitempty"`
	// End marks no call but the end of a streamed response (Index is the count of its
	// calls): the parser sends it when the last chunk is read, and the executor answers
	// it with a [ToolResult] marked End, running nothing, so that the formatter answers
	// the response once every call is answered. (All calls go through the executor: the
	// parser publishes no results.)
	End bool `json:"end,omitempty"`
}

// CallID is the id of the call at index within a response of a conversation. It dedupes
// the call and its result and keys its claim, so it is scoped by conversation: two
// conversations may give their responses the same id.
func CallID(conversation, responseID string, index int) string {
	return ScopedID(conversation, responseID) + "/" + strconv.Itoa(index)
}

// GeneratedCallID is the model-facing id of a call written without one ([ToolCall.ModelID]),
// made from its [CallID]: the same for every delivery of the response, and valid
// wherever the call's result may go back to — nine letters and digits, as Mistral's
// API requires, within the characters Anthropic's and Bedrock's ids allow and the
// lengths OpenAI's take.
func GeneratedCallID(callID string) string {
	const digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	sum := sha256.Sum256([]byte(callID))
	n := binary.BigEndian.Uint64(sum[:8])
	var id [9]byte
	for i := range id {
		id[i] = digits[n%uint64(len(digits))]
		n /= uint64(len(digits))
	}
	return string(id[:])
}

// ScopedID is a response id within its conversation: the message id of the response and
// of its output, and the key of its gathered results and its plan. Response ids are the
// orchestrator's and need only be unique within a conversation.
func ScopedID(conversation, responseID string) string {
	return conversation + "/" + responseID
}

// ToolResult answers one call. It travels on [ResultSubject] with Nats-Msg-Id set to the
// call id.
type ToolResult struct {
	CallID       string `json:"call_id"`
	ResponseID   string `json:"response_id"`
	Conversation string `json:"conversation"`
	Index        int    `json:"index"`
	Count        int    `json:"count"`
	// Next is the call's [ToolCall.Next].
	Next int    `json:"next,omitempty"`
	Tool string `json:"tool"`
	// ModelID and OutputFormat are the call's ([ToolCall.ModelID], [ToolCall.OutputFormat]).
	ModelID      string `json:"model_id,omitempty"`
	OutputFormat string `json:"output_format,omitempty"`
	Success      bool   `json:"success"`
	// Result is the tool's JSON result when Success.
	Result json.RawMessage `json:"result,omitempty"`
	// Error says why when not Success.
	Error *ResultError `json:"error,omitempty"`
	// Attempts counts the times the call was tried.
	Attempts int `json:"attempts,omitempty"`
	// Notice tells the model something it must know besides the outcome: that the
	// call ran in a new session of its server, the state of the earlier one lost.
	Notice string `json:"notice,omitempty"`
	// Stored, when set, names where the whole result is kept: Result is then a preview
	// of it (see [Preview]).
	Stored *StoredResult `json:"stored,omitempty"`
	// Content holds the blocks of an MCP tool's result that are not text (images,
	// audio, embedded resources), which Result names in their place ([Content]).
	Content []Content `json:"content,omitempty"`
	// Backend names what ran the call: "local", "engineering" or "mcp:<server>".
	Backend    string  `json:"backend,omitempty"`
	DurationMS float64 `json:"duration_ms,omitempty"`
	// ArgumentsBytes is the size of the call's arguments.
	ArgumentsBytes int `json:"arguments_bytes,omitempty"`
	// Policy is the revision of the policy (policy.rules) the call was answered under,
	// when there is one: the rules that allowed, refused or asked about it.
	Policy string `json:"policy,omitempty"`
	// Stream is the call's [ToolCall.Stream].
	Stream bool `json:"stream,omitempty"`
	// End is the call's [ToolCall.End].
	End bool `json:"end,omitempty"`
}

// ResultError is the failure of one call, as the model sees it.
type ResultError struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
}

// Fail returns r marked failed with err's code and message, the message within
// [MaxEchoedError] bytes ([EchoError]).
func (r ToolResult) Fail(err error) ToolResult {
	te := AsToolError(err)
	r.Success = false
	r.Result, r.Content = nil, nil
	r.Error = &ResultError{Code: te.Code, Message: EchoError(te.Message)}
	return r
}

// ResultFor returns an unfilled result addressed like call, naming its tool as results
// repeat names ([EchoName]).
func ResultFor(c ToolCall) ToolResult {
	return ToolResult{
		CallID: c.ID, ResponseID: c.ResponseID, Conversation: c.Conversation,
		Index: c.Index, Count: c.Count, Next: c.Next, Tool: EchoName(c.Tool), Stream: c.Stream, End: c.End,
		ModelID: c.ModelID, OutputFormat: c.OutputFormat,
		ArgumentsBytes: len(c.Arguments),
	}
}

// OutputKind says what an [Output] holds.
type OutputKind string

const (
	// KindToolResults: the response had calls; Results answers each, in order.
	KindToolResults OutputKind = "tool_results"
	// KindNoToolCall: the response had no call.
	KindNoToolCall OutputKind = "no_tool_call"
)

// Output is the one answer to a response. It travels on [OutputSubject] with Nats-Msg-Id
// set to the response id.
type Output struct {
	ResponseID   string     `json:"response_id"`
	Conversation string     `json:"conversation"`
	Kind         OutputKind `json:"kind"`
	// Text is the <tool_result> blocks to feed back to the model, one per call in order.
	Text string `json:"text"`
	// Results describe each call, in order. On the bus a result's value travels once,
	// in its block of Text, and not in Results[i].Result; [DecodeOutput] fills it in
	// from the block.
	Results []OutputResult `json:"results"`
	// NativeFormat and Native, when the response asked for an output format
	// (Toolbus-Output-Format, or the configuration's default): the API's name
	// ("openai", "openai_responses", "anthropic", "gemini", "bedrock", "ollama") and
	// the next turn in that API's shape, a JSON array of exactly what the orchestrator
	// appends to its next request (OpenAI's tool messages, Responses'
	// function_call_output items, an Anthropic user message of tool_result blocks, a
	// Gemini content of functionResponse parts, a Bedrock user message of toolResult
	// blocks, Ollama's tool messages), each result answering its call by
	// Results[i].CallID. See pkg/dialect's Turn.
	NativeFormat string          `json:"native_format,omitempty"`
	Native       json.RawMessage `json:"native,omitempty"`
}

// OutputResult is one call's result inside an [Output].
type OutputResult struct {
	// CallID is the call's id as the model's API gave it, or generated for a call
	// written without one ([ToolCall.ModelID]): the id the next request answers it by
	// (OpenAI's tool_call_id, Anthropic's tool_use_id, Responses' call_id, …).
	CallID  string          `json:"call_id,omitempty"`
	Tool    string          `json:"tool"`
	Success bool            `json:"success"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *ResultError    `json:"error,omitempty"`
	// Attempts counts the times the call was tried (0 when it was never tried).
	Attempts int `json:"attempts,omitempty"`
	// Notice is the result's [ToolResult.Notice].
	Notice string `json:"notice,omitempty"`
	// Stored, when set, names where the whole result is kept; Result is a preview.
	Stored *StoredResult `json:"stored,omitempty"`
	// Content is the result's [ToolResult.Content]: its images, audio and embedded
	// resources, which its block of Text names.
	Content []Content `json:"content,omitempty"`
	// DurationMS is how long the call ran (its last attempt), ArgumentsBytes the size
	// of its arguments.
	DurationMS     float64 `json:"duration_ms,omitempty"`
	ArgumentsBytes int     `json:"arguments_bytes,omitempty"`
	// Policy is the result's [ToolResult.Policy].
	Policy string `json:"policy,omitempty"`
}

// StoredResult names a result kept whole in a JetStream object store, because it was too
// large to travel inline: pkg/client's FetchResult reads it back and checks its sha256.
type StoredResult struct {
	Bucket string `json:"bucket"`
	Name   string `json:"name"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
}

// DeadCall is what the dead-letter stream keeps of a call that exhausted its deliveries
// with a transient failure: the call and the error it was answered with. It travels on
// [DeadSubject] with the call's id as message id.
type DeadCall struct {
	Call   ToolCall   `json:"call"`
	Result ToolResult `json:"result"`
}

// DeadLetter is what the dead-letter stream keeps of a message no stage finished (it ran
// out of deliveries) or that a stage terminated: the message with its history and what
// was answered in its place.
type DeadLetter struct {
	Stream     string              `json:"stream"`
	Sequence   uint64              `json:"sequence"`
	Subject    string              `json:"subject"`
	Header     map[string][]string `json:"header,omitempty"`
	Data       json.RawMessage     `json:"data,omitempty"`
	Text       string              `json:"text,omitempty"`
	Deliveries uint64              `json:"deliveries"`
	Reason     string              `json:"reason"`
	// Answer is what was published in its place, if anything: a [ToolResult] or an
	// [Output].
	Answer any `json:"answer,omitempty"`
}

// NewDeadLetter is the dead letter of the message at seq of stream: its body kept as JSON
// when it is JSON, else as text.
func NewDeadLetter(stream string, seq uint64, subject string, header map[string][]string, data []byte, deliveries uint64, reason string) DeadLetter {
	dl := DeadLetter{Stream: stream, Sequence: seq, Subject: subject, Header: header, Deliveries: deliveries, Reason: reason}
	if Valid(data) {
		dl.Data = data
	} else {
		dl.Text = string(data)
	}
	return dl
}

// HealthState is a server's state as healthd last saw it.
type HealthState string

const (
	HealthUnknown HealthState = "unknown"
	HealthUp      HealthState = "up"
	HealthDown    HealthState = "down"
	// HealthNeedsLogin: the server requires an OAuth authorization nobody has given
	// (or it was revoked); `toolbus auth login SERVER` gives it.
	HealthNeedsLogin HealthState = "needs_login"
)

// HealthStatus is one server's last probe. It travels on [HealthSubject] and is stored in
// the health bucket under the server's name.
type HealthStatus struct {
	Server string `json:"server"`
	// Transport is the one the server's session uses: the configured one, or "sse" for
	// an entry with a url and no type that fell back to HTTP+SSE.
	Transport string      `json:"transport"`
	State     HealthState `json:"state"`
	LatencyMS float64     `json:"latency_ms,omitempty"`
	Tools     int         `json:"tools,omitempty"`
	// Protocol is the MCP protocol version the last successful probe negotiated.
	Protocol string `json:"protocol,omitempty"`
	// Error is why the last probe failed; empty when it succeeded.
	Error string `json:"error,omitempty"`
	// Failures counts the consecutive failed probes; the server is down from the
	// threshold on (healthd's, default 3). Successes counts the consecutive good
	// probes of a server that is down: it is up again from two on (one with a threshold
	// of one), so that a server that answers one probe in two does not flap.
	Failures  int       `json:"failures,omitempty"`
	Successes int       `json:"successes,omitempty"`
	CheckedAt time.Time `json:"checked_at"`
	// ChangedAt is when State last changed.
	ChangedAt time.Time `json:"changed_at,omitzero"`
	// ProbedBy is the healthd replica that wrote the status.
	ProbedBy string `json:"probed_by,omitempty"`
	// Via says whose session the last probe went over: "executor <replica>" (the live
	// session that serves the server's calls) or "probe" (a session of healthd's own,
	// when no executor serves the server).
	Via string `json:"via,omitempty"`
	// History holds the server's last state changes, oldest first (at most
	// MaxHealthHistory).
	History []HealthChange `json:"history,omitempty"`
}

// ProbeRequest is healthd's question on [ProbeSubject].
type ProbeRequest struct {
	// Since: a call the server answered at or after this time shows it up, whatever
	// the probe meets (the previous probe's time).
	Since time.Time `json:"since,omitzero"`
	// Timeout bounds the probe over the session.
	Timeout Duration `json:"timeout,omitzero"`
}

// ProbeAnswer is an executor's answer on [ProbeSubject]: how its live session with the
// server is.
type ProbeAnswer struct {
	Server string `json:"server"`
	// Executor is the replica that answered.
	Executor string `json:"executor"`
	// NotServed: the executor has no such server (another configuration); healthd
	// probes it with a session of its own.
	NotServed bool `json:"not_served,omitempty"`
	// Starting: the executor's first connection to the server is still under way (no
	// verdict yet; the other fields are empty).
	Starting  bool    `json:"starting,omitempty"`
	LatencyMS float64 `json:"latency_ms,omitempty"`
	Protocol  string  `json:"protocol,omitempty"`
	Tools     int     `json:"tools,omitempty"`
	// Error is why the session does not work; empty when it answered.
	Error string `json:"error,omitempty"`
	// NeedsLogin: the server requires an OAuth authorization nobody has given (Error
	// says why).
	NeedsLogin bool `json:"needs_login,omitempty"`
	// Note says what is odd about a server that answered.
	Note string `json:"note,omitempty"`
	// Transport is the transport the session uses when it is not the configured one:
	// "sse" for an entry with a url and no type that fell back to HTTP+SSE.
	Transport string `json:"transport,omitempty"`
}

// MaxHealthHistory is how many state changes a [HealthStatus] keeps.
const MaxHealthHistory = 20

// HealthChange is one change of a server's state.
type HealthChange struct {
	From  HealthState `json:"from"`
	To    HealthState `json:"to"`
	At    time.Time   `json:"at"`
	Error string      `json:"error,omitempty"`
}

// ToolInfo describes a tool as backends list it.
type ToolInfo struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// ReadOnly and Idempotent come from the tool's annotations; they decide whether a
	// call whose outcome is unknown may be repeated.
	ReadOnly   bool `json:"readOnly,omitempty"`
	Idempotent bool `json:"idempotent,omitempty"`
	// ReadOnlyWhen marks some calls of a tool that is not ReadOnly as read-only: those
	// whose argument ReadOnlyWhen.Arg is one of its values (engineering's dispatch: its
	// info and list actions). The parser lets such calls run beside their neighbours.
	ReadOnlyWhen *ArgIn `json:"readOnlyWhen,omitempty"`
}

// ArgIn is a condition on a call's arguments: the string argument Arg is one of Values
// (compared without regard to case).
type ArgIn struct {
	Arg    string   `json:"arg"`
	Values []string `json:"values"`
}

// Holds reports whether the arguments (a JSON object) meet the condition; a nil
// condition never holds.
func (a *ArgIn) Holds(args json.RawMessage) bool {
	if a == nil {
		return false
	}
	var v map[string]json.RawMessage
	if json.Unmarshal(args, &v) != nil {
		return false
	}
	var got string
	if json.Unmarshal(v[a.Arg], &got) != nil {
		return false
	}
	for _, want := range a.Values {
		if strings.EqualFold(got, want) {
			return true
		}
	}
	return false
}

// ElicitRequest is a server's question to the user, in the middle of a call, forwarded
// to the conversation's orchestrator on [ElicitSubject] (elicitation policy "ask"). The
// orchestrator answers with an [ElicitResponse] before Deadline; no answer by then, or
// nobody listening, declines.
type ElicitRequest struct {
	Conversation string `json:"conversation"`
	Server       string `json:"server"`
	// Message is the server's question, for the user.
	Message string `json:"message"`
	// RequestedSchema is the flat JSON Schema of the answer's content (form mode).
	RequestedSchema json.RawMessage `json:"requested_schema,omitempty"`
	// Mode is "form" or "url"; URL is the page to send the user to in url mode.
	Mode     string    `json:"mode,omitempty"`
	URL      string    `json:"url,omitempty"`
	Deadline time.Time `json:"deadline,omitzero"`
}

// SampleRequest is a server's request for a model's completion (MCP's
// sampling/createMessage), in the middle of a call, forwarded to the conversation's
// orchestrator on [SampleSubject] (sampling policy "ask"). Messages, ModelPreferences
// and Metadata are MCP's, as the server wrote them. The orchestrator answers with a
// [SampleResponse] before Deadline; no answer by then, or nobody listening, refuses
// the request.
type SampleRequest struct {
	Conversation string `json:"conversation"`
	Server       string `json:"server"`
	// Messages are MCP's SamplingMessage objects: {"role": "user" | "assistant",
	// "content": {"type": "text", "text"} or an image or audio block}.
	Messages         json.RawMessage `json:"messages"`
	SystemPrompt     string          `json:"system_prompt,omitempty"`
	MaxTokens        int64           `json:"max_tokens"`
	Temperature      float64         `json:"temperature,omitempty"`
	StopSequences    []string        `json:"stop_sequences,omitempty"`
	ModelPreferences json.RawMessage `json:"model_preferences,omitempty"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
	Deadline         time.Time       `json:"deadline,omitzero"`
}

// SampleResponse is the orchestrator's answer to a [SampleRequest]: the model's message,
// its Content an MCP content block ({"type": "text", "text"}, or an image or audio
// block), or Error, which refuses the request with a reason the server is told.
type SampleResponse struct {
	Role       string          `json:"role,omitempty"`
	Content    json.RawMessage `json:"content,omitempty"`
	Model      string          `json:"model,omitempty"`
	StopReason string          `json:"stop_reason,omitempty"`
	Error      string          `json:"error,omitempty"`
}

// ElicitResponse is the orchestrator's answer: Action "accept" (with Content fitting
// the requested schema), "decline" or "cancel".
type ElicitResponse struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// The states of an [Approval].
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	// ApprovalExpired: nobody decided before the rule's timeout; the call is refused.
	ApprovalExpired = "expired"
)

// ApprovalRequest is a call that waits for a person's decision because a policy rule
// with effect "approve" matched it, as announced on [ApprovalSubject] and listed by
// `toolbus approvals ls`. The decision is bound to the arguments (ArgumentsSHA256) and
// the policy's revision: a call whose arguments or policy differ is asked about again.
type ApprovalRequest struct {
	// ID names the request in `toolbus approve ID` and `toolbus deny ID`.
	ID           string `json:"id"`
	CallID       string `json:"call_id"`
	Conversation string `json:"conversation"`
	ResponseID   string `json:"response_id"`
	// Tool is the tool's canonical name; Server its server ("" for a tool of none).
	Tool   string `json:"tool"`
	Server string `json:"server,omitempty"`
	// Arguments are the call's arguments with every configured secret masked, cut to
	// 256 KiB (Truncated); ArgumentsSHA256 is the hash of the arguments as the call
	// carries them, whole and unmasked, in hex.
	Arguments       json.RawMessage `json:"arguments"`
	Truncated       bool            `json:"truncated,omitempty"`
	ArgumentsSHA256 string          `json:"arguments_sha256"`
	// Rule is the rule that asks for approval, When its condition.
	Rule string `json:"rule"`
	When string `json:"when,omitempty"`
	// Revision is the policy's revision the request was made under.
	Revision    string    `json:"revision"`
	RequestedAt time.Time `json:"requested_at"`
	// Deadline is when the call is refused if nobody decided.
	Deadline time.Time `json:"deadline"`
}

// DecideRequest is a person's decision on a call waiting for approval, sent on
// [DecideSubject]. It is bound to the arguments the person saw: ArgumentsSHA256 must be
// the request's, or nothing is decided.
type DecideRequest struct {
	Approve bool `json:"approve"`
	// Reason is why; a denial's reason is what the model reads.
	Reason          string `json:"reason,omitempty"`
	ArgumentsSHA256 string `json:"arguments_sha256"`
}

// DecideReply is an executor's answer to a [DecideRequest]: the decision as recorded
// (its request's arguments masked), or Error saying why nothing was decided.
type DecideReply struct {
	Decision *Decision    `json:"decision,omitempty"`
	Error    *ResultError `json:"error,omitempty"`
}

// Decision is an approval as shown to people: the request and its decision, never the
// call itself, whose arguments are not masked.
type Decision struct {
	ApprovalRequest
	State     string    `json:"state"`
	DecidedBy string    `json:"decided_by,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
}

// Approval is the record of one [ApprovalRequest] in [BucketApprovals]: the request,
// the call itself (to run it once approved), and the decision.
type Approval struct {
	ApprovalRequest
	// State is ApprovalPending, ApprovalApproved, ApprovalDenied or ApprovalExpired.
	State string `json:"state"`
	// DecidedBy and Reason are who decided and why (a denial's reason is what the
	// model reads); DecidedAt when.
	DecidedBy string    `json:"decided_by,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	// Call is the call as the parser sent it, arguments unmasked: sent again to the
	// executors once decided.
	Call ToolCall `json:"call"`
	// Requeued is set once the decided call was sent again to be answered.
	Requeued bool `json:"requeued,omitempty"`
}
