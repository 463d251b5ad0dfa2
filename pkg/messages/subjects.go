package messages

import (
	"fmt"
	"strings"
)

// Subject roots. A subject is the root followed by one token: the conversation for the
// pipeline subjects, the server name for health.
const (
	responsesRoot = "toolbus.responses"
	callsRoot     = "toolbus.calls"
	resultsRoot   = "toolbus.results"
	outputRoot    = "toolbus.output"
	healthRoot    = "toolbus.health"
	deadRoot      = "toolbus.dead"
	statusRoot    = "toolbus.status"
	elicitRoot    = "toolbus.elicit"
	streamRoot    = "toolbus.stream"
	progressRoot  = "toolbus.progress"
	execRoot      = "toolbus.exec"
)

// Wildcards that match every subject of one kind; streams and consumers filter on them.
const (
	AllResponses = responsesRoot + ".>"
	AllCalls     = callsRoot + ".>"
	AllResults   = resultsRoot + ".>"
	AllOutputs   = outputRoot + ".>"
	AllHealth    = healthRoot + ".>"
	AllDead      = deadRoot + ".>"
	AllElicit    = elicitRoot + ".>"
	AllStream    = streamRoot + ".>"
	AllProgress  = progressRoot + ".>"
	// AllExec: the calls forwarded to the executor holding a conversation's session.
	AllExec = execRoot + ".>"
)

// StreamSubject is where an orchestrator publishes a response chunk by chunk while the
// model writes it: each chunk with the response's [HeaderResponseID], its
// [HeaderChunk] number (1, 2, …) and, on the last, [HeaderFinal].
func StreamSubject(conversation string) string { return streamRoot + "." + conversation }

// ProgressSubject carries each result of a streamed response as soon as it is answered
// (a [ToolResult], its value cut to a preview), before the response's one output.
func ProgressSubject(conversation string) string { return progressRoot + "." + conversation }

// ElicitSubject is where the executor asks a conversation's orchestrator a server's
// question (an [ElicitRequest], NATS request-reply): a server configured with the
// elicitation policy "ask" asked for user input in the middle of a call.
func ElicitSubject(conversation string) string { return elicitRoot + "." + conversation }

// ResponseSubject is where an orchestrator publishes a model's answer.
func ResponseSubject(conversation string) string { return responsesRoot + "." + conversation }

// CallSubject carries the tool calls the parser found.
func CallSubject(conversation string) string { return callsRoot + "." + conversation }

// ExecSubject is where the executor replica named owner takes the calls other replicas
// forward to it: the calls of conversations whose session with a server it holds
// (pkg/affinity). Core NATS request/reply, no stream.
func ExecSubject(owner string) string { return execRoot + "." + owner }

// ResultSubject carries the executor's answer to one call.
func ResultSubject(conversation string) string { return resultsRoot + "." + conversation }

// OutputSubject carries the one output of each response, for the orchestrator.
func OutputSubject(conversation string) string { return outputRoot + "." + conversation }

// HealthSubject carries the status of one tool server.
func HealthSubject(server string) string { return healthRoot + "." + server }

// StatusSubject is where every replica of a service answers requests for its status
// (readiness and the counts of the messages it handled), through nats.go/micro.
func StatusSubject(service string) string { return statusRoot + "." + service }

// DeadSubject keeps the messages of a conversation that could not be answered; a
// conversation no subject can carry (ValidateConversation) files under "unknown".
func DeadSubject(conversation string) string {
	if ValidateConversation(conversation) != nil {
		conversation = "unknown"
	}
	return deadRoot + "." + conversation
}

// ConversationFromSubject returns the conversation token of a pipeline subject, or "" when
// the subject is not one of toolbus's.
func ConversationFromSubject(subject string) string {
	for _, root := range [...]string{responsesRoot, streamRoot, callsRoot, resultsRoot, outputRoot, progressRoot, deadRoot} {
		if rest, ok := strings.CutPrefix(subject, root+"."); ok {
			return rest
		}
	}
	return ""
}

// MaxConversationLen bounds a conversation id; it becomes a subject token and a key.
const MaxConversationLen = 128

// ValidateConversation reports whether id can be used as a conversation: one subject
// token made of letters, digits, '-', '_' and '='. The same alphabet is valid in a
// JetStream key-value key, so the id can key session state unchanged.
func ValidateConversation(id string) error {
	if id == "" {
		return fmt.Errorf("conversation id is empty")
	}
	if len(id) > MaxConversationLen {
		return fmt.Errorf("conversation id is %d bytes, the limit is %d", len(id), MaxConversationLen)
	}
	for i := 0; i < len(id); i++ {
		if !keyByte(id[i]) {
			return fmt.Errorf("conversation id %q: byte %d (%q) is not a letter, digit, '-', '_' or '='", id, i, id[i])
		}
	}
	return nil
}

func keyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '='
}
