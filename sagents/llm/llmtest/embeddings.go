package llmtest

import (
	"encoding/json"
	"fmt"
	"strings"
)

// EchoEmbeddings answers an embeddings request with the vector
// [len(text), position in this request] for each input, listing the data in
// reverse order (clients must order by "index"). Non-embedding requests get
// a 500.
func EchoEmbeddings(r Request) Reply {
	var req struct {
		Input []string `json:"input"`
	}
	if !strings.HasSuffix(r.Path, "/embeddings") || json.Unmarshal(r.Body, &req) != nil {
		return Error(500, "server_error", "", "", "llmtest: not an embeddings request")
	}
	var data []string
	for i := len(req.Input) - 1; i >= 0; i-- {
		data = append(data, fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":[%d,%d]}`, i, len(req.Input[i]), i))
	}
	return Reply{Body: fmt.Sprintf(`{"object":"list","model":%q,"data":[%s],"usage":{"prompt_tokens":1,"total_tokens":1}}`,
		Model, strings.Join(data, ","))}
}
