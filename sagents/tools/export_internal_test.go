package tools

// The external tests' names for helpers the package keeps unexported.
const BytesPerToken = bytesPerToken

var (
	Bound      = boundText
	ParseSkill = parseSkill
)
