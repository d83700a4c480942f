package otelsage_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/otelsage"
)

// The model client with tracing: Setup exports OTLP to the collector the
// standard OTEL_* variables name (Jaeger, Langfuse, Phoenix, an
// OpenTelemetry Collector, ...) and registers its handler with the
// Manager the client reports to; each call is a GenAI "chat" span with
// its tokens. Here the collector is an in-process OTLP receiver and the
// model the replay server; the README shows this example.
func ExampleSetup() {
	ctx := context.Background()
	collector, stop := exampleCollector() // stands in for Jaeger or any OTLP collector
	defer stop()
	defer setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+collector.addr+"/otlp")()
	defer setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")()
	srv, err := replay.Start() // stands in for an OpenAI-compatible server
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	baseURL, model := srv.URL, replay.Model

	obs := observability.New(observability.Options{})
	shutdown, err := otelsage.Setup(ctx, otelsage.SetupOptions{ServiceName: "my-app", Manager: obs}) // OTLP to $OTEL_EXPORTER_OTLP_ENDPOINT
	if err != nil {
		log.Fatal(err)
	}
	defer shutdown(ctx)

	client, err := llm.New(llm.Config{
		Standard: llm.ModelConfig{BaseURL: baseURL, APIKey: os.Getenv("OPENAI_API_KEY"), Model: model},
		Observer: obs,
	})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := client.Chat(ctx, llm.NewRequest(llm.SystemMessage("You write Python."), llm.UserMessage("Write fib.py.")))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Content())

	if err := shutdown(ctx); err != nil { // flushes the spans to the collector
		log.Fatal(err)
	}
	fmt.Println("collector got:", collector.spanNames()["my-app"])
	// Output:
	// [replay] This is a scripted replay, not a language model. Plan: write a Python script, run it, read its output, answer.
	// First, write fib.py.
	// collector got: [chat sage-replay]
}

// exampleCollector is the OTLP/HTTP receiver of the tests on 127.0.0.1,
// for examples (which have no *testing.T).
func exampleCollector() (*receiver, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	r := &receiver{addr: ln.Addr().String()}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return r, func() { _ = srv.Close() }
}

// setenv sets an environment variable and returns what restores it.
func setenv(k, v string) func() {
	old, had := os.LookupEnv(k)
	if err := os.Setenv(k, v); err != nil {
		log.Fatal(err)
	}
	return func() {
		if had {
			_ = os.Setenv(k, old)
		} else {
			_ = os.Unsetenv(k)
		}
	}
}
