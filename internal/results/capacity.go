package results

// Outcomes of a capacity search.
const (
	// CapacityFound: the highest passing rate is within the search's
	// precision of the lowest failing one.
	CapacityFound = "found"
	// CapacityBounded: a passing and a failing rate were found, but the
	// step or time bound stopped the bisection before the precision was
	// reached; the capacity lies between CapacityPerS and FailedAtPerS.
	CapacityBounded = "bounded"
	// CapacityAtLeast: no rate tried failed (the search reached its upper
	// rate, or a bound stopped it while still growing); the capacity is at
	// least CapacityPerS.
	CapacityAtLeast = "at_least"
	// CapacityBelow: the lowest rate tried (From) failed; there is no
	// capacity figure, only "below From".
	CapacityBelow = "below"
)

// CapacitySearch is what a capacity search did in one run: the SLO, the
// rates it tried and what each measured, and its outcome. The run's
// Measurement (operations, latencies) is that of its highest passing step
// (the lowest step, which failed, when none passed).
type CapacitySearch struct {
	// SLO is the highest value allowed per figure (p99_ms, error_rate, …).
	SLO  map[string]float64 `json:"slo"`
	From float64            `json:"from"`
	To   float64            `json:"to"`
	// Precision is the relative gap between the highest passing and the
	// lowest failing rate at which the bisection stops.
	Precision float64 `json:"precision"`
	Outcome   string  `json:"outcome"`
	// CapacityPerS is the highest rate that met the SLO (0 when Outcome is
	// CapacityBelow); FailedAtPerS the lowest that did not (0: none failed).
	CapacityPerS float64 `json:"capacity_per_s,omitempty"`
	FailedAtPerS float64 `json:"failed_at_per_s,omitempty"`
	// Stopped says why the search ended ("precision 5% reached",
	// "max_steps 12", "reached to 5000/s", …).
	Stopped  string         `json:"stopped"`
	Steps    []CapacityStep `json:"steps"`
	ElapsedS float64        `json:"elapsed_s"`
}

// CapacityStep is one measured rate of a search.
type CapacityStep struct {
	RatePerS float64 `json:"rate_per_s"`
	// Figures are the SLO's figures as measured, plus throughput_per_s.
	Figures   map[string]float64 `json:"figures,omitempty"`
	Pass      bool               `json:"pass"`
	Reason    string             `json:"reason,omitempty"` // why it failed: "p99_ms 73.2 > 50"
	DurationS float64            `json:"duration_s"`
}
