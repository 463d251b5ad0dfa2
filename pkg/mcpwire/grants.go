package mcpwire

import (
	"errors"

	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
)

// GrantChanged tells the pool that the OAuth grant of server changed where the grants
// are kept (a login, a logout, another replica's refresh): its requests read the grant
// again from the next one on, and a server that waits for a login connects again at
// once; "" means every server's may have. The executor calls it for every change its
// token store's watch sees.
func (p *Pool) GrantChanged(server string) {
	for _, s := range p.sorted() {
		if s.oc == nil || (server != "" && s.name != server) {
			continue
		}
		s.oc.Forget()
		if err := s.lastErr(); errors.Is(err, oauth.ErrNeedsLogin) {
			poke(s.wake)
		}
	}
}
