//! `simulate --trace-out FILE`: the run's spans as OTLP JSON, one
//! `ExportTraceServiceRequest` per line (the OpenTelemetry file exporter
//! format), built by the OpenTelemetry SDK and the `opentelemetry-proto`
//! types (their serde JSON is the OTLP JSON mapping), never by hand.
//!
//! The spans carry the virtual clock's times; their ids come from a counter
//! (not random), so the same scenario writes the same file.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{IdGenerator, SdkTracerProvider, SpanData, SpanExporter};

/// Keeps every exported span in memory until the run is over.
#[derive(Clone, Debug, Default)]
struct Collect(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Collect {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(batch);
        Ok(())
    }
}

/// Trace and span ids from a counter: reproducible files.
#[derive(Debug, Default)]
struct Counting(AtomicU64);

impl IdGenerator for Counting {
    fn new_trace_id(&self) -> TraceId {
        TraceId::from(u128::from(self.0.fetch_add(1, Ordering::Relaxed) + 1))
    }
    fn new_span_id(&self) -> SpanId {
        SpanId::from(self.0.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

/// Installs a global tracer provider that collects the run's spans.
pub struct TraceOut {
    file: std::fs::File,
    provider: SdkTracerProvider,
    spans: Collect,
    resource: Resource,
}

impl TraceOut {
    /// Creates `path` (a usage error when it cannot be) and installs the
    /// provider; the runtime built next picks it up (`Telemetry::global()`).
    pub fn install(path: &Path) -> anyhow::Result<TraceOut> {
        let file = std::fs::File::create(path).map_err(|e| {
            crate::Usage(format!(
                "--trace-out {}: {e}; give a writable file path",
                path.display()
            ))
        })?;
        let spans = Collect::default();
        let resource = Resource::builder_empty()
            .with_service_name("agent-recovery")
            .build();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .with_id_generator(Counting::default())
            .with_resource(resource.clone())
            .build();
        opentelemetry::global::set_tracer_provider(provider.clone());
        Ok(TraceOut {
            file,
            provider,
            spans,
            resource,
        })
    }

    /// Flushes the spans and writes them to the file as one OTLP JSON line.
    pub fn write(mut self, path: &Path) -> anyhow::Result<()> {
        self.provider
            .force_flush()
            .map_err(|e| anyhow::anyhow!("flushing the spans: {e}"))?;
        let spans =
            std::mem::take(&mut *self.spans.0.lock().unwrap_or_else(PoisonError::into_inner));
        let request = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(
                spans,
                &ResourceAttributesWithSchema::from(&self.resource),
            ),
        };
        let mut line =
            serde_json::to_string(&request).context("encoding the spans as OTLP JSON")?;
        line.push('\n');
        std::io::Write::write_all(&mut self.file, line.as_bytes())
            .map_err(|e| crate::Usage(format!("--trace-out {}: {e}", path.display())))?;
        Ok(())
    }
}
