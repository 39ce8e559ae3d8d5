// check_llamacpp.mjs — helper of tools/check_llamacpp.sh: greedy continuations by llama.cpp through
// node-llama-cpp (CPU, prebuilt binaries; nothing is built here), from token ids given by petrel's
// tokenizer, so only the forward passes are compared.
// Usage: node tools/check_llamacpp.mjs NODE_MODULES_DIR MODEL N_PREDICT IDS[,IDS...] [IDS ...]
//        (one comma-separated id list per prompt; prints one line of generated ids per prompt)
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [dir, modelPath, nStr, ...prompts] = process.argv.slice(2);
const lib = await import(pathToFileURL(join(dir, "node-llama-cpp", "dist", "index.js")).href);
const llama = await lib.getLlama({ gpu: false, build: "never", logLevel: lib.LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath });
const n = parseInt(nStr, 10);
for (const p of prompts) {
    const ids = p.split(",").map((s) => parseInt(s, 10));
    // F32 KV cache and no flash attention: the numerics of the fixtures' oracle (and petrel); the
    // defaults (F16 cache, flash attention) move logits enough to flip near ties
    const ctx = await model.createContext({
        contextSize: 256, threads: 2, flashAttention: false,
        experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    });
    const seq = ctx.getSequence();
    const out = [];
    for await (const t of seq.evaluate(ids, { temperature: 0 })) {
        out.push(t);
        if (out.length >= n) break;
    }
    console.log(out.join(" "));
    await ctx.dispose();
}
await model.dispose();
await llama.dispose();
