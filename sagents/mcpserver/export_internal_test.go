package mcpserver

// ResourcePath is resourcePath for the external tests (the fuzz test).
var ResourcePath = resourcePath
