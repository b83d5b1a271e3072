package lookup

import (
	"strings"
	"testing"
)

// FuzzDecodeAnswer checks that no body panics the decoder, and that every body it accepts yields
// clients with non-blank identifiers and names.
func FuzzDecodeAnswer(f *testing.F) {
	for _, s := range []string{
		`{"clients":[]}`,
		`{"clients":[{"externalId":"p-1","name":"Ada Lovelace"}]}`,
		`{"clients":[{"externalId":"p-1","name":"Ada","phone":"+44"}],"next":null}`,
		`{"clients":null}`, `[]`, `null`, `{"clients":[1]}`, `{"clients":[{"externalId":"\u0000","name":"x"}]}`,
		`{"clients":[{"externalId":"a","name":"b"}]}   `, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		clients, err := decodeAnswer(body)
		if err != nil {
			if clients != nil {
				t.Errorf("clients %v with error %v", clients, err)
			}
			return
		}
		if clients == nil {
			t.Error("nil clients without an error; want an empty slice")
		}
		for _, c := range clients {
			if strings.TrimSpace(c.ExternalID) == "" || strings.TrimSpace(c.Name) == "" {
				t.Errorf("accepted a blank client %+v from %q", c, body)
			}
		}
	})
}
