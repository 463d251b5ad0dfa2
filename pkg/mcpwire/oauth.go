package mcpwire

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// oauthHandler authorizes the requests of an http server whose configuration has an
// "oauth" entry, through the go-sdk: the client credentials grant (SEP-1046), the
// token endpoint and scopes discovered from the server's protected resource metadata
// and its authorization server's metadata when the server first answers 401.
func oauthHandler(o *OAuthConfig, hc *http.Client) (auth.OAuthHandler, error) {
	return extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
		Credentials: &oauthex.ClientCredentials{
			ClientID:         o.ClientID,
			ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: o.ClientSecret},
		},
		HTTPClient: hc,
	})
}
