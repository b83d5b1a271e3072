package translator

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/callwire/callwire/sdk/event"
	pb "github.com/callwire/callwire/sdk/translator/wire"
)

// FuzzValidUTF8 sends arbitrary texts through the host's Ack and the translator's Done, the way
// the adapters do: the message always marshals, the far side reads each text with only its
// invalid bytes replaced, and what Emit returns for the Ack carries the repaired text.
func FuzzValidUTF8(f *testing.F) {
	for _, s := range []string{"", "outbox full", "\xff\xfe bad", "caf\xc3", "日本\xe6\x97", "\x00\x80"} {
		f.Add(s, "call.direction", s)
	}
	f.Fuzz(func(t *testing.T, text, field, message string) {
		ack := pb.ValidUTF8(&pb.HostMessage{Msg: &pb.HostMessage_Ack{Ack: &pb.Ack{
			Id: 7, Error: text, Problems: []*pb.Problem{{Field: field, Message: message}},
		}}})
		done := pb.ValidUTF8(&pb.TranslatorMessage{Msg: &pb.TranslatorMessage_Done{Done: &pb.Done{Error: text}}})
		for _, sent := range []proto.Message{ack, done} {
			data, err := proto.Marshal(sent)
			if err != nil {
				t.Fatalf("marshal %v: %v", sent, err)
			}
			back := sent.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(data, back); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !proto.Equal(back, sent) {
				t.Fatalf("sent %v, read %v", sent, back)
			}
		}
		fixed := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		if got := done.GetDone().GetError(); got != fixed(text) || (utf8.ValidString(text) && got != text) {
			t.Errorf("Done.error %q became %q", text, got)
		}
		err := ackError(ack.GetAck())
		var ve *event.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 {
			t.Fatalf("ackError = %v, want the problem", err)
		}
		if p := ve.Problems[0]; p.Field != fixed(field) || p.Message != fixed(message) {
			t.Errorf("problem %q: %q became %q: %q", field, message, p.Field, p.Message)
		}
		ack.GetAck().Problems = nil
		var refused *RefusedError
		switch err := ackError(ack.GetAck()); {
		case text == "" && err != nil:
			t.Errorf("an empty error became %v", err)
		case text != "" && (!errors.As(err, &refused) || refused.Reason != fixed(text)):
			t.Errorf("Ack.error %q became %v", text, err)
		}
	})
}
