package sdktest

import (
	"net/http"
	"net/http/httptest"
)

// InProcess returns a transport that answers each request with h in the calling goroutine, with
// no socket: a client using it (sdk.Options.HTTPClient, an agent, any http.Client) can run inside
// a testing/synctest bubble, whose clock stands still while any goroutine in it waits on the
// network. A request whose context has ended fails with the context's error, before or after h
// ran, as with a real transport.
func InProcess(h http.Handler) http.RoundTripper { return inProcess{h} }

type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	in := r.Clone(r.Context())
	if in.Body == nil {
		in.Body = http.NoBody
	}
	defer in.Body.Close()
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, in)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}
