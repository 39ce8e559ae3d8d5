// openai_client.mjs — drives a running `petrel serve` with the official `openai` npm client,
// the way apps and agents do: models, chat (plain, streamed with usage, a tool-call round trip),
// completions, the Responses API stream, structured output through the SDK's parse() helpers
// (chat and responses), forced tool calls (named and required, streamed and not), a
// previous_response_id turn, and errors surfacing as the SDK's typed exceptions.
// Usage: node openai_client.mjs BASE_URL   (e.g. http://127.0.0.1:8080/v1)
// Prints one line per check; exits 1 on the first failure. Run by tests/test_serve.c.
import OpenAI from "openai";
import { zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { z } from "zod";

const baseURL = process.argv[2];
if (!baseURL) {
  console.error("usage: node openai_client.mjs BASE_URL");
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey: "not-needed", timeout: 30000, maxRetries: 0 });

let n = 0;
function check(cond, what) {
  if (!cond) {
    console.error(`FAIL: ${what}`);
    process.exit(1);
  }
  n++;
}

const messages = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Tell me about SSDs" },
];

// models
const models = await client.models.list();
check(models.data.length === 1 && typeof models.data[0].id === "string", "models.list");

// non-streaming chat
const c1 = await client.chat.completions.create({ model: "any", messages, max_tokens: 8, temperature: 0 });
check(c1.object === "chat.completion", "chat object");
check(typeof c1.choices[0].message.content === "string", "chat content");
check(c1.usage.prompt_tokens > 5 && c1.usage.completion_tokens > 0, "chat usage");

// streamed chat with usage: same text as the non-streamed one (greedy), KV prefix reused
const stream = await client.chat.completions.create({
  model: "any", messages, max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let text = "", usage = null, finish = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  if (chunk.usage) usage = chunk.usage;
  const ch = chunk.choices[0];
  if (ch?.delta?.content) text += ch.delta.content;
  if (ch?.finish_reason) finish = ch.finish_reason;
}
check(text === c1.choices[0].message.content, `streamed text equals the non-streamed one ('${text}')`);
check(chunks >= 3 && finish !== null, "stream chunks and finish_reason");
check(usage && usage.prompt_tokens_details.cached_tokens === usage.prompt_tokens - 1, "cached_tokens on a repeated prompt");

// a tool-call round trip: the assistant's call and the tool's result go back in
const tools = [{
  type: "function",
  function: { name: "get_weather", description: "Weather of a city",
              parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
}];
const c2 = await client.chat.completions.create({
  model: "any", tools, tool_choice: "auto", max_tokens: 6, temperature: 0,
  messages: [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
    { role: "tool", tool_call_id: "call_1", content: "18 C, sunny" },
  ],
});
check(["stop", "length", "tool_calls"].includes(c2.choices[0].finish_reason), "tool round trip");
if (c2.choices[0].message.tool_calls)
  for (const tc of c2.choices[0].message.tool_calls) JSON.parse(tc.function.arguments);

// completions
const c3 = await client.completions.create({ model: "any", prompt: "Once upon a time", max_tokens: 4 });
check(typeof c3.choices[0].text === "string" && c3.usage.completion_tokens === 4, "completions");

// Responses API stream, as Codex reads it
const rs = await client.responses.create({
  model: "any", instructions: "You are a coding agent.", input: "List the files", max_output_tokens: 8,
  temperature: 0, stream: true,
  tools: [{ type: "function", name: "shell", description: "run", parameters: { type: "object", properties: {} } }],
});
const types = [];
let deltaText = "", final = null;
for await (const ev of rs) {
  types.push(ev.type);
  if (ev.type === "response.output_text.delta") deltaText += ev.delta;
  if (ev.type === "response.completed" || ev.type === "response.incomplete") final = ev.response;
}
check(types[0] === "response.created" && types[1] === "response.in_progress", `responses start (${types.slice(0, 2)})`);
check(types.includes("response.output_item.added") && types.includes("response.output_item.done"), "responses items");
check(final && final.id.startsWith("resp_") && final.usage.output_tokens > 0, "responses final event");
const msg = final.output.find((o) => o.type === "message");
if (msg) check(msg.content[0].text === deltaText, "responses deltas add up to the final text");

// structured output: the SDK's parse() with a zod schema (json_schema, strict); the random test
// model is held to it by the server's grammar. Thinking off, so the budget goes to the JSON.
const noThink = { chat_template_kwargs: { enable_thinking: false } };
// (enums and booleans only: maxLength counts code points, zod's max() UTF-16 units, and the
// random model writes astral characters)
const Item = z.object({ ok: z.boolean(), color: z.enum(["red", "green", "blue"]), size: z.enum(["S", "M", "L"]) });
const p1 = await client.chat.completions.parse({
  model: "any", messages: [{ role: "user", content: "Describe an item" }], max_tokens: 400, ...noThink,
  response_format: zodResponseFormat(Item, "item"),
});
const parsed = p1.choices[0].message.parsed;
check(p1.choices[0].finish_reason === "stop" && parsed && typeof parsed.ok === "boolean" &&
      ["red", "green", "blue"].includes(parsed.color) && ["S", "M", "L"].includes(parsed.size),
      `chat.completions.parse gives the schema's object (${JSON.stringify(parsed)})`);
const p2 = await client.responses.parse({
  model: "any", input: "Describe an item", max_output_tokens: 400, reasoning: { effort: "none" },
  text: { format: zodTextFormat(Item, "item") },
});
check(p2.status === "completed" && p2.output_parsed && typeof p2.output_parsed.ok === "boolean",
      `responses.parse gives the schema's object (${JSON.stringify(p2.output_parsed)})`);
const j1 = await client.chat.completions.create({
  model: "any", messages: [{ role: "user", content: "JSON please" }], max_tokens: 200, ...noThink,
  response_format: { type: "json_object" },
});
if (j1.choices[0].finish_reason === "stop")
  check(typeof JSON.parse(j1.choices[0].message.content) === "object", "json_object gives a JSON object");

// forced tool calls: a named function, then "required", streamed through the SDK's helper
const cityTool = [{ type: "function", function: { name: "get_weather", description: "Weather of a city",
  parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 } }, required: ["city"],
                additionalProperties: false } } },
  { type: "function", function: { name: "get_time", description: "The time",
    parameters: { type: "object", properties: {}, additionalProperties: false } } }];
const t1 = await client.chat.completions.create({
  model: "any", messages: [{ role: "user", content: "Weather in Paris?" }], max_tokens: 400, ...noThink,
  tools: cityTool, tool_choice: { type: "function", function: { name: "get_weather" } }, parallel_tool_calls: false,
});
const call = t1.choices[0].message.tool_calls && t1.choices[0].message.tool_calls[0];
check(t1.choices[0].finish_reason === "tool_calls" && t1.choices[0].message.tool_calls.length === 1 &&
      call.function.name === "get_weather" && typeof JSON.parse(call.function.arguments).city === "string",
      `a named tool_choice returns that call (${call && call.function.arguments})`);
const ts = client.chat.completions.stream({
  model: "any", messages: [{ role: "user", content: "What now?" }], max_tokens: 400, ...noThink,
  tools: cityTool, tool_choice: "required", parallel_tool_calls: false,
});
const tf = await ts.finalChatCompletion();
const scall = tf.choices[0].message.tool_calls && tf.choices[0].message.tool_calls[0];
check(tf.choices[0].finish_reason === "tool_calls" && scall && ["get_weather", "get_time"].includes(scall.function.name),
      `tool_choice "required", streamed: the SDK assembles the call (${scall && scall.function.name})`);
// the call goes back with its result; "none" then answers in text
const t2 = await client.chat.completions.create({
  model: "any", max_tokens: 8, ...noThink, tools: cityTool, tool_choice: "none",
  messages: [{ role: "user", content: "Weather in Paris?" }, t1.choices[0].message,
             { role: "tool", tool_call_id: call.id, content: "18 C, sunny" }],
});
check(!t2.choices[0].message.tool_calls && t2.choices[0].finish_reason !== "tool_calls", 'tool_choice "none" answers in text');

// a Responses conversation continued by previous_response_id
const r1 = await client.responses.create({ model: "any", input: "My name is Ada.", max_output_tokens: 4 });
const r2 = await client.responses.create({ model: "any", previous_response_id: r1.id, input: "Who am I?", max_output_tokens: 4 });
check(r2.previous_response_id === r1.id && r2.usage.input_tokens > r1.usage.input_tokens, "previous_response_id continues");
const got = await client.responses.retrieve(r1.id);
check(got.id === r1.id, "responses.retrieve");
await client.responses.delete(r1.id);
try {
  await client.responses.retrieve(r1.id);
  check(false, "a deleted response must be gone");
} catch (e) {
  check(e instanceof OpenAI.NotFoundError, "a deleted response is a NotFoundError");
}

// errors are the SDK's typed exceptions with the server's message
try {
  await client.chat.completions.create({ model: "any", messages: [{ role: "wizard", content: "x" }] });
  check(false, "a bad role must fail");
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && /unknown role/.test(e.message), `BadRequestError (${e.message})`);
}

console.log(`openai client: ${n} checks passed`);
