package bus

import (
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/messages"
)

// UserInbox returns the connection option that puts every reply to a connection of the
// user in urls (comma-separated NATS URLs; the first naming a user wins) under that
// user's inbox prefix, messages.InboxPrefix: deploy/nats.conf lets each user subscribe
// to its own prefix only, so nobody reads the replies (pulled messages, key-value reads,
// status answers) of another. A URL without a user keeps NATS's default, "_INBOX".
func UserInbox(urls string) nats.Option {
	user := URLUser(urls)
	if !subjectTokens(user) {
		user = "" // no prefix can be made of it: NATS's default
	}
	return nats.CustomInboxPrefix(messages.InboxPrefix(user))
}

// subjectTokens reports whether s can follow "_INBOX." in a subject: tokens separated by
// single dots, without wildcards or white space.
func subjectTokens(s string) bool {
	if s == "" || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return false
	}
	return !strings.ContainsAny(s, "*> \t\r\n")
}

// URLUser returns the user named in the first of urls that names one, or "".
func URLUser(urls string) string {
	for _, u := range strings.Split(urls, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err == nil && p.User != nil && p.User.Username() != "" {
			return p.User.Username()
		}
	}
	return ""
}
