package messages

import (
	"fmt"
	"strconv"
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
	sampleRoot    = "toolbus.sample"
	streamRoot    = "toolbus.stream"
	progressRoot  = "toolbus.progress"
	execRoot      = "toolbus.exec"
	answersRoot   = "toolbus.answers"
	probeRoot     = "toolbus.probe"
	rejectedRoot  = "toolbus.rejected"
	approvalsRoot = "toolbus.approvals"
	decideRoot    = "toolbus.decide"
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
	// AllAnswers: the orchestrators' answers to servers' questions (AnswerSubject).
	AllAnswers = answersRoot + ".>"
	// AllSample: the servers' sampling requests to the orchestrators (SampleSubject).
	AllSample = sampleRoot + ".>"
	// AllProbes: healthd's questions to the executors about their servers' sessions.
	AllProbes = probeRoot + ".>"
	// AllApprovals: every conversation's approval requests (ApprovalSubject).
	AllApprovals = approvalsRoot + ".>"
	// AllDecisions: every user's decisions on calls waiting for approval
	// (DecideSubject), which the executors answer.
	AllDecisions = decideRoot + ".>"
	// AllRejected: every tenant's rejections (RejectedSubject).
	AllRejected = rejectedRoot + ".*"
)

// RejectedSubject is where the sender of a response or chunk that nobody can route is
// told so, besides the copy kept in the dead-letter stream: a message on subject whose
// conversation no subject can carry (ValidateConversation: "x+y", "acme.x.y"), of a
// tenant the deployment does not serve, or a chunk without a response id. Its body is
// the message's DeadLetter (the reason, the subject, the response id header), published
// on core NATS: an orchestrator that wants to hear of it subscribes before it publishes.
// It is the tenant's subject, the one subject of the rejection an orchestrator may read
// (deploy/nats.conf): TenantRejectedSubject of the tenant the subject's conversation
// names, or of the default tenant when it names none that is valid. "" for a subject no
// orchestrator publishes on (calls, results: toolbus's own, dead-lettered only).
func RejectedSubject(subject string) string {
	conv, ok := strings.CutPrefix(subject, responsesRoot+".")
	if !ok {
		if conv, ok = strings.CutPrefix(subject, streamRoot+"."); !ok {
			return ""
		}
	}
	tenant, _, dotted := strings.Cut(conv, ".")
	if !dotted || ValidateTenant(tenant) != nil {
		tenant = ""
	}
	return TenantRejectedSubject(tenant)
}

// TenantRejectedSubject is the rejection subject of tenant (RejectedSubject):
// toolbus.rejected.<tenant>, and toolbus.rejected._ for the default tenant ("_" can be
// no tenant's name).
func TenantRejectedSubject(tenant string) string {
	if tenant == "" {
		tenant = "_"
	}
	return rejectedRoot + "." + tenant
}

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

// ApprovalSubject is where the executor announces a call of conversation that waits
// for a person's decision (an [ApprovalRequest]: a policy rule with effect "approve"
// matched it). The request is kept in [BucketApprovals], where `toolbus approvals`
// and the console read and decide it; this subject tells whoever watches at once.
func ApprovalSubject(conversation string) string { return approvalsRoot + "." + conversation }

// DecideSubject is where a person, connected as NATS user user, decides the call waiting
// under approval id (a [DecideRequest], NATS request-reply, answered by an executor with
// a [DecideReply]). The executors alone write the approvals bucket; the subject names
// who decides, and NATS rights let each user publish under its own name only
// (deploy/nats.conf), so the decision's DecidedBy is the authenticated user, and a
// tenant's user decides only its tenant's calls ([UserTenant]).
func DecideSubject(user, id string) string { return decideRoot + "." + user + "." + id }

// DecideSubjectParts returns the user and approval id of a subject of [DecideSubject].
func DecideSubjectParts(subject string) (user, id string, ok bool) {
	rest, ok := strings.CutPrefix(subject, decideRoot+".")
	if !ok {
		return "", "", false
	}
	user, id, ok = strings.Cut(rest, ".")
	return user, id, ok && user != "" && id != "" && !strings.Contains(id, ".")
}

// UserTenant says whose calls NATS user may decide: a tenant's orchestrator user
// (deploy's TenantUser: "orchestrator" for the default tenant, the tenant's name for
// another) its tenant's only (tenant, true); toolbus's console and admin users, and any
// user of a deployment without NATS users (the embedded server), every tenant's
// (all true).
func UserTenant(user string, tenants []string) (tenant string, all bool) {
	if user == "orchestrator" {
		return "", false
	}
	for _, t := range tenants {
		if t != "" && t == user {
			return t, false
		}
	}
	return "", true
}

// TenantUser is the NATS user of a tenant's orchestrator: "orchestrator" for the default
// tenant (""), the tenant's name otherwise.
func TenantUser(tenant string) string {
	if tenant == "" {
		return "orchestrator"
	}
	return tenant
}

// SampleSubject is where the executor asks a conversation's orchestrator for a model's
// completion (a [SampleRequest], NATS request-reply, answered on an [AnswerSubject]): a
// server configured with the sampling policy "ask" sent sampling/createMessage in the
// middle of a call.
func SampleSubject(conversation string) string { return sampleRoot + "." + conversation }

// AnswerSubject is where a conversation's orchestrator answers the elicitation request
// id (a random token) that the executor asked on [ElicitSubject]: the request's reply
// subject. An orchestrator may publish on its own conversations' answer subjects
// (AnswerSubjects), and needs no right to answer on anyone's inbox.
func AnswerSubject(conversation, id string) string {
	return answersRoot + "." + conversation + "." + id
}

// AnswerSubjects is the pattern of a tenant's answer subjects (see TenantSubjects).
func AnswerSubjects(tenant string) string {
	if tenant == "" {
		return answersRoot + ".*.*"
	}
	return answersRoot + "." + tenant + ".*.*"
}

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

// ProbeSubject is where healthd asks the executors how their live session with a
// server is (NATS request-reply, answered by one executor of the queue group
// [ProbeQueue] with a [ProbeAnswer]): health is judged by the sessions that serve calls,
// not by a session or process of healthd's own.
func ProbeSubject(server string) string { return probeRoot + "." + server }

// ProbeQueue is the queue group the executors answer [ProbeSubject] in.
const ProbeQueue = "toolbus-executors"

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

// redrivePrefix starts the subjects of the dead-letter stream that keep the records of
// redrives ([RedriveSubject]).
const redrivePrefix = deadRoot + "._redrive."

// AllRedrives are the subjects of every redrive record: toolbus_dead_letters counts the
// dead-letter stream without them.
const AllRedrives = redrivePrefix + "*"

// RedriveSubject is where the dead-letter stream keeps the record of the redrives of the
// dead letter at seq: beside the conversations' subjects and none of them (a tenant's
// name starts with a letter, and a conversation of one token makes a subject of one
// token less), so that whether a dead letter was redriven is one lookup, and the dead
// letters can be counted without the records.
func RedriveSubject(seq uint64) string { return redrivePrefix + strconv.FormatUint(seq, 10) }

// IsRedriveSubject reports whether subject keeps a redrive record.
func IsRedriveSubject(subject string) bool { return strings.HasPrefix(subject, redrivePrefix) }

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

// TenantSubjects are the subjects of kind root (OutputSubject, ProgressSubject, …) that
// belong to tenant: root.* for the default tenant (conversations of one token),
// root.<tenant>.* for a configured tenant. Built from the subject functions, so they
// match exactly what those produce.
func TenantSubjects(subject func(string) string, tenant string) string {
	if tenant == "" {
		return subject("*")
	}
	return subject(tenant + ".*")
}

// MaxConversationLen bounds a conversation id; it becomes a subject token and a key.
const MaxConversationLen = 128

// ValidateConversation reports whether id can be used as a conversation: one subject
// token made of letters, digits, '-', '_' and '=', or a tenant's conversation,
// "<tenant>.<token>" (ValidateTenant). The same alphabet (and the dot) is valid in a
// JetStream key-value key, so the id can key session state unchanged.
func ValidateConversation(id string) error {
	if id == "" {
		return fmt.Errorf("conversation id is empty")
	}
	if len(id) > MaxConversationLen {
		return fmt.Errorf("conversation id is %d bytes, the limit is %d", len(id), MaxConversationLen)
	}
	tenant, conv, dotted := strings.Cut(id, ".")
	if dotted {
		if err := ValidateTenant(tenant); err != nil {
			return fmt.Errorf("conversation id %q: %w", id, err)
		}
		if conv == "" {
			return fmt.Errorf("conversation id %q: nothing follows the tenant", id)
		}
	} else {
		conv = id
	}
	for i := 0; i < len(conv); i++ {
		if !keyByte(conv[i]) {
			return fmt.Errorf("conversation id %q: byte %d (%q) is not a letter, digit, '-', '_' or '='", id, len(id)-len(conv)+i, conv[i])
		}
	}
	return nil
}

func keyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '='
}

// MaxTenantLen bounds a tenant's name: it is a subject token, and part of stream, bucket
// and user names.
const MaxTenantLen = 32

// ValidateTenant reports whether name can name a tenant: lower-case letters, digits, '-'
// and '_', starting with a letter, at most MaxTenantLen bytes, and not a name toolbus
// gives its own users (ReservedUsers).
func ValidateTenant(name string) error {
	if name == "" {
		return fmt.Errorf("tenant name is empty")
	}
	if len(name) > MaxTenantLen {
		return fmt.Errorf("tenant name %q is %d bytes, the limit is %d", name, len(name), MaxTenantLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '_')) {
			return fmt.Errorf("tenant name %q: byte %d (%q) is not a lower-case letter (first) or a lower-case letter, digit, '-' or '_'", name, i, c)
		}
	}
	for _, u := range ReservedUsers {
		if name == u {
			return fmt.Errorf("tenant name %q is the name of one of toolbus's own NATS users", name)
		}
	}
	return nil
}

// ReservedUsers are the NATS users of deploy/nats.conf that are not tenants: a tenant's
// orchestrator user is named as the tenant, so no tenant may take one of these names.
var ReservedUsers = []string{"sys", "admin", "parser", "executor", "formatter", "healthd", "console", "orchestrator"}

// Tenant returns the tenant of a conversation: what comes before its dot, or "" (the
// deployment's default tenant) for a conversation of one token.
func Tenant(conversation string) string {
	tenant, _, ok := strings.Cut(conversation, ".")
	if !ok {
		return ""
	}
	return tenant
}

// InboxPrefix is the inbox prefix of a NATS user: every reply to a toolbus connection
// of user arrives under it (nats.CustomInboxPrefix), and deploy/nats.conf lets each user
// subscribe to its own prefix only, so that nobody reads another's replies. "" for no
// user: NATS's default, "_INBOX".
func InboxPrefix(user string) string {
	if user == "" {
		return inboxRoot
	}
	return inboxRoot + "." + user
}

const inboxRoot = "_INBOX"
