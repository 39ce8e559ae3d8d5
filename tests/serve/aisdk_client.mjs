// aisdk_client.mjs — drives a running `petrel serve` with the Vercel AI SDK (`ai` +
// `@ai-sdk/openai-compatible`), as apps built on it do: generateText, streamText (with usage
// and the finish reason), a multi-turn conversation, structured output (Output.object), forced
// tool calls (toolChoice required and a named tool, generated and streamed), and errors surfacing
// as the SDK's typed APICallError.
// Usage: node aisdk_client.mjs BASE_URL   (e.g. http://127.0.0.1:8080/v1)
// Prints one line per check; exits 1 on the first failure. Run by tests/test_serve.c.
import { generateText, streamText, APICallError, Output, tool } from "ai";
import { z } from "zod";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";

const baseURL = process.argv[2];
if (!baseURL) {
  console.error("usage: node aisdk_client.mjs BASE_URL");
  process.exit(2);
}
const petrel = createOpenAICompatible({
  name: "petrel", baseURL, apiKey: "not-needed", includeUsage: true, supportsStructuredOutputs: true,
});
const model = petrel.chatModel("any");

let n = 0;
function check(cond, what) {
  if (!cond) {
    console.error(`FAIL: ${what}`);
    process.exit(1);
  }
  console.log(`ok ${what}`);
  n++;
}

// generateText
const g = await generateText({ model, prompt: "Tell me about SSDs", maxOutputTokens: 8, temperature: 0, maxRetries: 0 });
check(typeof g.text === "string", "generateText text");
check(g.finishReason === "length" || g.finishReason === "stop", `generateText finishReason (${g.finishReason})`);
check(g.usage.inputTokens > 3 && g.usage.outputTokens > 0, "generateText usage");

// streamText: the same greedy text, streamed
const s = streamText({ model, prompt: "Tell me about SSDs", maxOutputTokens: 8, temperature: 0, maxRetries: 0 });
let streamed = "";
for await (const part of s.textStream) streamed += part;
check(streamed === g.text, `streamText text equals generateText's ('${streamed}')`);
const su = await s.usage;
check(su.outputTokens > 0 && su.inputTokens === g.usage.inputTokens, "streamText usage");
check((await s.finishReason) === g.finishReason, "streamText finishReason");

// a conversation with a system prompt and an earlier assistant turn
const c = await generateText({
  model, maxOutputTokens: 4, temperature: 0, maxRetries: 0,
  system: "Be brief.",
  messages: [
    { role: "user", content: "Hello" },
    { role: "assistant", content: g.text || "Hi" },
    { role: "user", content: [{ type: "text", text: "And again" }] },
  ],
});
check(typeof c.text === "string" && c.usage.inputTokens > g.usage.inputTokens, "multi-turn messages");

// structured output and forced tools; thinking off (the random test model would reason away
// the budget), passed as a provider option the SDK puts in the request body
const noThink = { petrel: { chat_template_kwargs: { enable_thinking: false } } };
const o = await generateText({
  model, prompt: "Describe an item", maxOutputTokens: 400, maxRetries: 0, providerOptions: noThink,
  output: Output.object({ schema: z.object({ ok: z.boolean(), color: z.enum(["red", "green"]), size: z.enum(["S", "L"]) }) }),
});
check(o.output && typeof o.output.ok === "boolean" && ["red", "green"].includes(o.output.color),
      `Output.object gives the schema's object (${JSON.stringify(o.output)})`);
const tools = {
  get_weather: tool({ description: "Weather of a city", inputSchema: z.object({ city: z.enum(["Paris", "Rome"]) }) }),
  get_time: tool({ description: "The time", inputSchema: z.object({}) }),
};
const t1 = await generateText({
  model, prompt: "Weather in Paris?", maxOutputTokens: 400, maxRetries: 0, providerOptions: noThink, tools,
  toolChoice: { type: "tool", toolName: "get_weather" },
});
check(t1.toolCalls.length >= 1 && t1.toolCalls[0].toolName === "get_weather" && typeof t1.toolCalls[0].input.city === "string",
      `a named toolChoice returns that call (${JSON.stringify(t1.toolCalls[0] && t1.toolCalls[0].input)})`);
const t2 = streamText({
  model, prompt: "What now?", maxOutputTokens: 400, maxRetries: 0, providerOptions: noThink, tools, toolChoice: "required",
});
const calls = await t2.toolCalls;
check(calls.length >= 1 && ["get_weather", "get_time"].includes(calls[0].toolName),
      `toolChoice "required", streamed (${calls.map((c) => c.toolName)})`);

// an invalid request becomes the SDK's typed error with the server's message
let caught = null;
try {
  await generateText({ model, prompt: "x", maxOutputTokens: 4, temperature: 5000, maxRetries: 0 });
} catch (e) {
  caught = e;
}
check(caught && APICallError.isInstance(caught) && caught.statusCode === 400 && /temperature/.test(caught.message),
      `a 400 is an APICallError naming the field (${caught && caught.message})`);

console.log(`${n} checks passed`);
