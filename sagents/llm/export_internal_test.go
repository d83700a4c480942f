package llm

// ProviderName is providerName for the external tests.
var ProviderName = providerName
