package aioapi

// Proxy is the transport's proxy function, for the external tests.
var Proxy = noProxyForLocal
