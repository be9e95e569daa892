// The observation mix of the decide_json benchmarks, included by
// host/benches/decide.rs, host/examples/wasm_calls.rs and
// guest/examples/pieces.rs. Observations as hosts see them: HTTP with provider
// bodies, MCP, A2A, transport errors (taken from tests/vectors).

/// The 13 observations, each preceded by what it is.
const MIX: &[&str] = &[
    // HTTP 429 with Retry-After and rate-limit headers
    r#"{"source":"http","status":429,"headers":{"retry-after":"2","x-ratelimit-limit":"100","x-ratelimit-remaining":"0","date":"Sun, 22 Nov 2026 02:00:00 GMT","content-type":"application/json"},"body":"{\"message\":\"slow down\"}"}"#,
    // openai 429 rate_limit_exceeded waits for the exhausted token window
    r#"{"source":"http","status":429,"provider":"openai","headers":{"x-ratelimit-remaining-requests":"499","x-ratelimit-reset-requests":"120ms","x-ratelimit-remaining-tokens":"0","x-ratelimit-reset-tokens":"1.5s"},"body":{"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29800, Requested 900.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}}"#,
    // openai 400 context_length_exceeded is context overflow with the param as field
    r#"{"source":"http","status":400,"body":{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}}"#,
    // anthropic 529 overloaded_error with request_id from the body
    r#"{"source":"http","status":529,"body":{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}}"#,
    // anthropic 429 rate_limit_error honours retry-after
    r#"{"source":"http","status":429,"headers":{"retry-after":"12","anthropic-ratelimit-requests-remaining":"0","request-id":"req_hdr"},"body":{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit."},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}}"#,
    // gemini 429 per-minute quota is a rate limit with RetryInfo delay (no hint)
    r#"{"source":"http","status":429,"body":{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"},"quotaValue":"15"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"28s"}]}}}"#,
    // bedrock ThrottlingException via x-amzn-ErrorType (hint bedrock)
    r#"{"source":"http","status":429,"provider":"bedrock","headers":{"x-amzn-ErrorType":"ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/","x-amzn-RequestId":"5d1c-req"},"body":{"message":"Too many requests, please wait before trying again."}}"#,
    // MCP isError tool result is semantic
    r#"{"source":"mcp","message":{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"Error calling tool 'fetch_data': connection refused"}],"isError":true}}}"#,
    // MCP unknown tool is -32602
    r#"{"source":"mcp","message":{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unknown tool: invalid_tool_name"}}}"#,
    // A2A v0.3 failed task
    r#"{"source":"a2a","message":{"jsonrpc":"2.0","id":3,"result":{"id":"task-abc-123","contextId":"ctx-1","status":{"state":"failed","message":{"role":"agent","parts":[{"kind":"text","text":"Database connection refused"}]}},"kind":"task"}}}"#,
    // network ECONNRESET
    r#"{"source":"network","code":"ECONNRESET","message":"socket hang up"}"#,
    // timeout phase read
    r#"{"source":"timeout","phase":"read","after_ms":5000}"#,
    // exception httpx.ReadTimeout
    r#"{"source":"exception","type":"httpx.ReadTimeout","message":"whatever"}"#,
];
