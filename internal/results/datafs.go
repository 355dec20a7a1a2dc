package results

// DataFSInfo is the data filesystem a run's services wrote to (the plan's
// filesystem knob): what was asked and what the kernel shows for the
// mount, so a record says which options really applied.
type DataFSInfo struct {
	FS      string   `json:"fs"`
	Options []string `json:"options,omitempty"` // as the plan wrote them
	Size    int64    `json:"size"`
	Device  string   `json:"device"` // the loop device
	Mount   string   `json:"mount"`
	// Applied are mountinfo's mount options, then the filesystem's
	// ("rw", "noatime", "rw", "nobarrier", "data=writeback").
	Applied []string `json:"applied,omitempty"`
}
