package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolbus/toolbus/pkg/messages"
)

// ErrContentOmitted: a content block's data was too large to travel and could not be
// kept ([messages.Content].Omitted); only its description is left.
var ErrContentOmitted = errors.New("client: the content's data was left out")

// FetchContent returns the bytes of a content block of a result (an image, audio, an
// embedded blob: [messages.OutputResult].Content), decoded from its inline base64 or read
// from the object store when it is stored (checked against its size and sha256), for
// a model that takes them: the block's MimeOf says what they are.
func (c *Client) FetchContent(ctx context.Context, block messages.Content) ([]byte, error) {
	switch {
	case block.Stored != nil:
		return c.FetchResult(ctx, block.Stored)
	case block.Inline() != "":
		b, err := block.Decode()
		if err != nil {
			return nil, fmt.Errorf("client: %s content: %w", block.Type, err)
		}
		return b, nil
	case block.Omitted:
		return nil, ErrContentOmitted
	}
	return []byte{}, nil
}
