package callmodel

import (
	"maps"

	"github.com/emiago/sipgo/sip"
)

// newParser returns a sipgo parser for the messages these readings take. It is sipgo's default
// parser except that Refer-To and Referred-By stay as text: sipgo's own Refer-To parser drops
// the display name and header parameters, and rejects the whole message when the value does not
// parse, where an observer must still see (and a proxy still forward) the REFER. sipgo keeps the
// compact form "r:" as text already.
func newParser() *sip.Parser {
	hp := maps.Clone(sip.DefaultHeadersParser())
	delete(hp, "refer-to")
	delete(hp, "referred-by")
	return sip.NewParser(sip.WithHeadersParsers(hp))
}
