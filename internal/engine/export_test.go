package engine

// Internal test helpers the external kill test (package engine_test, which
// may import the daemon package without a cycle) uses.
var (
	DockerClientForTest = dockerClient
	TinyImageForTest    = tinyImage
	TinyBinaryForTest   = tinyBinary
	TinyServiceForTest  = tinyService
	LeftoversForTest    = leftovers
	NewRunIDForTest     = newRunID
	RemoveTinyDir       = func() {
		if tinyDir != "" {
			_ = removeAll(tinyDir)
		}
	}
)
