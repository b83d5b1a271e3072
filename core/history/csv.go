package history

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/callwire/callwire/core/store"
)

// csvPage is how many calls the CSV export reads at a time: what it holds in memory, however
// many rows it writes.
const csvPage = 500

// csvLayout is how the CSV export writes a time: in the organization's zone, named in the
// timezone column, in the form spreadsheets read as a date and time.
const csvLayout = "2006-01-02 15:04:05"

// csvHeader names the CSV export's columns (docs/history.md).
var csvHeader = []string{"id", "provider", "provider_call_id", "direction",
	"from_number", "from_name", "from_extension", "to_number", "to_name", "to_extension",
	"state", "outcome", "disposition", "timezone", "started_at", "answered_at", "ended_at",
	"duration", "talk_time", "answered_by", "answered_elsewhere", "locations", "crm_clients",
	"recordings", "transcribed", "sip_code", "sip_reason"}

// Export is a CSV export under way: its first page read, the rest read as it is written.
type Export struct {
	s     *Service
	q     Query
	first []store.CallRecord
}

// Export starts the CSV export of every call q selects (its cursor and limit aside), reading
// the first page now, so that a store that fails at once fails the request rather than the
// body.
func (s *Service) Export(ctx context.Context, q Query) (*Export, error) {
	first, err := s.r.ListCalls(ctx, q.orgID, q.q.filter, nil, csvPage)
	if err != nil {
		return nil, wrap("export calls", err)
	}
	return &Export{s: s, q: q, first: first}, nil
}

// WriteTo writes the export to w, newest call first: a header line, then a row per call, with
// times in the organization's zone. It reads a page of csvPage calls at a time and flushes each,
// so that memory stays flat however many rows it writes. It stops at the first error of w or of
// the store, which it returns; the rows written so far stand.
func (e *Export) WriteTo(ctx context.Context, w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	zone := e.q.loc.String()
	recs := e.first
	e.first = nil
	for {
		for i := range recs {
			if err := cw.Write(csvRow(&recs[i], e.q.loc, zone)); err != nil {
				return err
			}
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
		if f, ok := w.(interface{ Flush() error }); ok {
			if err := f.Flush(); err != nil {
				return err
			}
		}
		if len(recs) < csvPage {
			return nil
		}
		after := recs[len(recs)-1].Call.Position()
		next, err := e.s.r.ListCalls(ctx, e.q.orgID, e.q.q.filter, &after, csvPage)
		if err != nil {
			return wrap("export calls", err)
		}
		recs = next
	}
}

// csvRow is the CSV export's row of r.
func csvRow(r *store.CallRecord, loc *time.Location, zone string) []string {
	it := NewItem(&r.Call, r.Events)
	var party struct {
		Number, Name, Extension string
	}
	from, to := party, party
	_ = json.Unmarshal(it.From, &from)
	_ = json.Unmarshal(it.To, &to)
	local := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.In(loc).Format(csvLayout)
	}
	str := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	num := func(f *float64) string {
		if f == nil {
			return ""
		}
		return strconv.FormatFloat(*f, 'f', -1, 64)
	}
	var locations []string
	_ = json.Unmarshal(it.Locations, &locations)
	var clients []struct{ Name string }
	_ = json.Unmarshal(it.CRMClients, &clients)
	names := make([]string, len(clients))
	for i, cl := range clients {
		names[i] = cl.Name
	}
	urls := make([]string, len(it.Recordings))
	for i, rec := range it.Recordings {
		urls[i] = rec.URL
	}
	sip := ""
	if it.SIPCode != nil {
		sip = strconv.Itoa(*it.SIPCode)
	}
	started := it.StartedAt
	row := []string{it.ID, it.Provider, it.ProviderCallID, it.Direction,
		from.Number, from.Name, from.Extension, to.Number, to.Name, to.Extension,
		it.State, it.Outcome, str(it.Disposition), zone, local(&started), local(it.AnsweredAt), local(it.EndedAt),
		num(it.Duration), num(it.TalkTime), str(it.AnsweredBy), strconv.FormatBool(it.AnsweredElsewhere),
		strings.Join(locations, "|"), strings.Join(names, "|"), strings.Join(urls, "|"),
		strconv.FormatBool(it.Transcribed), sip, str(it.SIPReason)}
	for i, v := range row {
		row[i] = defuse(v)
	}
	return row
}

// defuse keeps a spreadsheet from reading a cell as a formula: a value that begins with =, +,
// -, @, a tab or a carriage return gets a leading apostrophe, unless it is a number such as
// +442071234567 (OWASP, "CSV Injection", https://owasp.org/www-community/attacks/CSV_Injection).
func defuse(v string) string {
	if v == "" || !strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return v
	}
	if len(v) > 1 && (v[0] == '+' || v[0] == '-') && strings.Trim(v[1:], "0123456789.") == "" {
		return v
	}
	return "'" + v
}
