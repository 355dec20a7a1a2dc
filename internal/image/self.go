package image

// SelfPath is where a Program image (and any image with a Self file the
// caller places there) keeps the ctrperf binary.
const SelfPath = "/ctrperf"

// Program is the recipe of a FROM-scratch image holding the ctrperf binary
// itself (File.Self), whose entrypoint runs one of ctrperf's hidden
// commands (`/ctrperf __ticketd`); a service's Command is appended as that
// command's arguments. Its recipe hash covers the binary's bytes, so an
// unchanged ctrperf never rebuilds it, and building it needs neither the
// source tree nor a Go toolchain.
func Program(name, ref, command string) Derived {
	return Derived{
		Name:       name,
		Ref:        ref,
		From:       Scratch,
		Files:      map[string]File{SelfPath: {Mode: 0o755, Self: true}},
		Entrypoint: []string{SelfPath, command},
	}
}
