package cost

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Dimension is what a report's rows are: one per group, slot, requester or
// claim (Unclaimed gathers the time of no claim).
type Dimension string

const (
	ByGroup     Dimension = "group"
	BySlot      Dimension = "slot"
	ByRequester Dimension = "requester"
	ByClaim     Dimension = "claim"
)

// Dimensions lists them.
var Dimensions = []Dimension{ByGroup, BySlot, ByRequester, ByClaim}

// ParseDimension reads a --by value.
func ParseDimension(s string) (Dimension, error) {
	for _, d := range Dimensions {
		if string(d) == s {
			return d, nil
		}
	}
	return "", fmt.Errorf("by %q: must be one of group, slot, requester, claim", s)
}

// rowKey: a row is one key in one currency (a requester's machines may be
// priced in more than one).
type rowKey struct{ key, currency string }

// acc is what a row accumulates, in seconds and joules.
type acc struct {
	upSeconds   float64
	bootSeconds float64
	joules      float64
	cost        float64
	boots       int
	failedBoots int
	unwanted    [4]float64 // seconds, by Reasons index
}

func (f *Fold) row(a attribution, rows map[rowKey]*acc) *acc {
	var key string
	switch f.dim {
	case ByGroup:
		key = a.group
	case BySlot:
		key = a.slot
	case ByRequester:
		key = a.requester
	default:
		key = a.claim
	}
	k := rowKey{key, a.rates.currency}
	r := rows[k]
	if r == nil {
		r = &acc{}
		rows[k] = r
	}
	return r
}

// Row is one line of a report.
type Row struct {
	// Key is the group, slot, requester or claim; "unclaimed" for time no
	// claim held.
	Key          string  `json:"key" yaml:"key"`
	Currency     string  `json:"currency" yaml:"currency"`
	MachineHours float64 `json:"machineHours" yaml:"machineHours"`
	BootHours    float64 `json:"bootHours" yaml:"bootHours"`
	KWh          float64 `json:"kWh" yaml:"kWh"`
	Cost         float64 `json:"cost" yaml:"cost"`
	Boots        int     `json:"boots" yaml:"boots"`
	FailedBoots  int     `json:"failedBoots" yaml:"failedBoots"`
	// UnwantedHours is the up-time no claim wanted, by reason (Reasons);
	// UnwantedShare is its share of MachineHours.
	UnwantedHours map[string]float64 `json:"unwantedHours" yaml:"unwantedHours"`
	UnwantedShare float64            `json:"unwantedShare" yaml:"unwantedShare"`
}

// Report is a cost report over [Since, Until).
type Report struct {
	Since time.Time `json:"since" yaml:"since"`
	Until time.Time `json:"until" yaml:"until"`
	// AskedUntil, when set, is the end of the period asked for, which was
	// after now: the report is cut at now (Until), as the hours after it
	// have not happened.
	AskedUntil *time.Time `json:"askedUntil,omitempty" yaml:"askedUntil,omitempty"`
	By         Dimension  `json:"by" yaml:"by"`
	Rows       []Row      `json:"rows" yaml:"rows"`
	// Totals has one row per currency, its Key "total".
	Totals []Row `json:"totals" yaml:"totals"`
	// Forecast, only when asked for and the period ends after now, is
	// what the whole period would cost if the pool stayed as it is now.
	Forecast *Forecast `json:"forecast,omitempty" yaml:"forecast,omitempty"`
}

// ForecastBasis says what a Forecast assumes.
const ForecastBasis = "a forecast, not what happened: every machine up (or booting) at now stays so, at its power and price, until the period's end; no claim, boot or shutdown comes"

// Forecast is the cost of [Since, Until) of its report if the state at
// the report's Until (now) held until the end asked for: the hours so far
// plus the open intervals carried on. It is never mixed into the rows.
type Forecast struct {
	// Basis is ForecastBasis: the answer labels itself.
	Basis string    `json:"basis" yaml:"basis"`
	Until time.Time `json:"until" yaml:"until"`
	Rows  []Row     `json:"rows" yaml:"rows"`
	// Totals has one row per currency, its Key "total".
	Totals []Row `json:"totals" yaml:"totals"`
}

// ForecastOf labels the report of the whole period, its open intervals
// counted until its end, as the forecast.
func ForecastOf(whole Report) *Forecast {
	return &Forecast{Basis: ForecastBasis, Until: whole.Until, Rows: whole.Rows, Totals: whole.Totals}
}

// Report is the report of what the fold has seen, its open intervals
// (machines still on, boots under way) counted until end when the fold's
// window is open, else until its end. The fold is not changed: it may fold
// more events and report again.
func (f *Fold) Report(end time.Time) Report {
	end, rows := f.closed(end)
	rep := Report{Since: f.since, Until: end, By: f.dim, Rows: []Row{}}
	totals := map[string]*acc{}
	for _, k := range slices.SortedFunc(maps.Keys(rows), func(a, b rowKey) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.currency, b.currency)
	}) {
		a := rows[k]
		rep.Rows = append(rep.Rows, a.row(k.key, k.currency))
		t := totals[k.currency]
		if t == nil {
			t = &acc{}
			totals[k.currency] = t
		}
		t.upSeconds += a.upSeconds
		t.bootSeconds += a.bootSeconds
		t.joules += a.joules
		t.cost += a.cost
		t.boots += a.boots
		t.failedBoots += a.failedBoots
		for i := range a.unwanted {
			t.unwanted[i] += a.unwanted[i]
		}
	}
	for _, c := range slices.Sorted(maps.Keys(totals)) {
		rep.Totals = append(rep.Totals, totals[c].row("total", c))
	}
	return rep
}

// Precision of the figures a report shows: a millionth of an hour, a kWh
// or a currency unit, so that a sum of seconds reads as the hand-computed
// figure.
const precision = 1e6

func round(x float64) float64 { return math.Round(x*precision) / precision }

func (a *acc) row(key, currency string) Row {
	r := Row{
		Key: key, Currency: currency,
		MachineHours: round(a.upSeconds / 3600), BootHours: round(a.bootSeconds / 3600),
		KWh: round(a.joules / 3.6e6), Cost: round(a.cost),
		Boots: a.boots, FailedBoots: a.failedBoots,
		UnwantedHours: map[string]float64{},
	}
	var unwanted float64
	for i, reason := range Reasons {
		r.UnwantedHours[reason] = round(a.unwanted[i] / 3600)
		unwanted += a.unwanted[i]
	}
	if a.upSeconds > 0 {
		r.UnwantedShare = round(unwanted / a.upSeconds)
	}
	return r
}

// Seconds is the raw machine-seconds of every row, by key: what the
// property tests sum (Report rounds).
func (f *Fold) Seconds(end time.Time) map[string]float64 {
	_, rows := f.closed(end)
	out := map[string]float64{}
	for k, a := range rows {
		out[k.key] += a.upSeconds
	}
	return out
}

// closed is a copy of the rows with every slot's open interval accrued
// until end (the window's end when it has one).
func (f *Fold) closed(end time.Time) (time.Time, map[rowKey]*acc) {
	if !f.until.IsZero() {
		end = f.until
	}
	rows := make(map[rowKey]*acc, len(f.rows))
	for k, v := range f.rows {
		c := *v
		rows[k] = &c
	}
	for _, s := range f.order {
		if len(s.segs) > 0 && s.powerAt.Before(end) {
			f.accrue(s, s.on, s.powerAt, end, rows)
		}
	}
	return end, rows
}
