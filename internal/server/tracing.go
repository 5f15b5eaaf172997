package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracing answers where the invoker's spans go: cfg.TracerProvider when
// set; otherwise an OTLP exporter when the standard OpenTelemetry
// environment, read through env (nil reads none), asks for one;
// otherwise nil, and no span is recorded. stop flushes and stops a
// provider built here (nil for none). A provider built here exports
// through a spanQueue (its sizes explicit, its drops counted: q answers
// it, nil for a provider not built here), so a collector that hangs or
// refuses never slows a call.
//
// The environment is the SDKs' own: OTEL_TRACES_EXPORTER (otlp or none;
// unset means otlp once an endpoint is given), OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, their _HEADERS, _TIMEOUT,
// _COMPRESSION and TLS settings, which the exporter reads itself,
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, and OTEL_SDK_DISABLED.
// Only the http/protobuf protocol is built in.
func tracing(ctx context.Context, cfg Config, env func(string) string) (tp trace.TracerProvider, stop func(), q *spanQueue, err error) {
	if cfg.TracerProvider != nil {
		return cfg.TracerProvider, nil, nil, nil
	}
	if env == nil {
		return nil, nil, nil, nil
	}
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return nil, nil, nil, nil
	}
	switch exporter := strings.TrimSpace(env("OTEL_TRACES_EXPORTER")); exporter {
	case "none":
		return nil, nil, nil, nil
	case "":
		if env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil, nil, nil
		}
	case "otlp":
	default:
		return nil, nil, nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: this build exports traces by otlp only (or none)", exporter)
	}
	protocol := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if protocol != "" && protocol != "http/protobuf" {
		return nil, nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: this build exports traces over http/protobuf only", protocol)
	}
	// The endpoint is read here, through env, and given to the exporter
	// (which reads the rest of its settings from the process's
	// environment itself): what decided to export decides where to.
	var opts []otlptracehttp.Option
	if u := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); u != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	} else if u := env("OTEL_EXPORTER_OTLP_ENDPOINT"); u != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimRight(u, "/")+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	// The environment's service name and attributes, read last, win over
	// the build's own.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "toolplane"), attribute.String("service.version", cfg.Version)),
		resource.WithFromEnv())
	if err != nil {
		exp.Shutdown(ctx)
		return nil, nil, nil, fmt.Errorf("the trace resource: %w", err)
	}
	q = newSpanQueue(exp, spanQueueSize, spanBatchSize, spanBatchWait, spanExportLimit)
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q), sdktrace.WithResource(res))
	stop = func() {
		// Spans still queued are sent, within a bound: a collector that
		// does not answer must not hold the shutdown.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sdk.Shutdown(sctx)
	}
	return sdk, stop, q, nil
}
