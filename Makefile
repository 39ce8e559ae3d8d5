# petrel — build, test, fuzz, bench, format.  See README.md.
#
#   make                 release build (-O2, portable; SIMD chosen at run time) -> build/petrel
#   make native          the same with -march=native -> build/native/petrel
#   make test            install missing build deps, build, run every test
#   make test SANITIZE=1 the same suite under ASan + UBSan (objects in build/san)
#   make test TSAN=1     the threaded suites under ThreadSanitizer (objects in build/tsan;
#                        T="serve session" picks suites, default $(TSAN_SUITES))
#   make fuzz            libFuzzer runs of every target in tests/fuzz (FUZZ_SECONDS each, default 60):
#                        the GGUF parser, request -> template -> tokenizer, the chat output parser,
#                        the expert-pack reader, GBNF and JSON Schema -> GBNF and the grammar matcher
#                        (objects in build/fuzz, built by clang)
#   make fuzz-ci         the same, 20 s a target, from the seed corpus in tests/fuzz/corpus (.ci/run)
#   make bench           kernel microbenchmarks (GB/s, SIMD vs scalar), tokenizer and grammar
#                        (constrained decoding) costs, then petrel vs llama.cpp on a synthetic
#                        glm-dsa model (bench/run.sh; set LLAMA_CPP_DIR), in-memory prompt
#                        512/4096 and decode after 16/4096 vs llama-bench -lm none on it and
#                        a gemma4-shaped model (bench/inmem.sh), and a 12k-token
#                        prompt's TTFT cold vs restored after a server restart (bench/pcache.sh)
#   make bench BENCH_STREAM=1   also the streaming benchmark (bench/stream.sh: root, cgroup v1;
#                        a 16.8 GiB glm-dsa and a 14.3 GiB Gemma-4-shaped model under a 4 GiB
#                        limit; 10-15 min each, +4 min to make a model and its pack;
#                        BENCH_STREAM_ARCHS="glm-dsa gemma4" picks them)
#   make bench BENCH_PROMPT=1   also the long-prompt benchmark (bench/prompt.sh: root, cgroup v1;
#                        2k and 8k-token prompts under 4 and 8 GiB limits on the same two models,
#                        expert bytes read vs routed, llama.cpp mmap bounded by a timeout)
#   make arm64-icount    instructions per block of every arm64 kernel, counted under qemu
#                        (bench/arm64_icount.sh; make test-arm64 for the arm64 tests)
#   make bench BENCH_KVSPILL=1  also KV beyond RAM (bench/kvspill.sh: root to drop the page cache;
#                        decode after a 32k context on a streaming glm-dsa with most of the KV on
#                        the SSD vs all in RAM, alternated, 3 runs each; the context's KV is
#                        computed once (~25 min on two shared cores) and kept in build/bench/,
#                        then ~3 min a run of the benchmark)
#   make format          clang-format every source file (make format-check: only check; make test does)

CC       ?= cc
SANITIZE ?= 0
TSAN     ?= 0
NATIVE   ?= 0
FUZZ     ?= 0
ARCH     := $(shell uname -m)
# CROSS=aarch64: the arm64 build (make test-arm64), cross-compiled by Debian's
# gcc-aarch64-linux-gnu (CROSS_CC="clang --target=aarch64-linux-gnu" for clang) against the
# arm64 libraries (dpkg multiarch), objects in build/arm64 (build/arm64-clang with clang).
CROSS    ?=
PKG_CONFIG := pkg-config
ifeq ($(CROSS),aarch64)
  ARCH     := aarch64
  CROSS_CC ?= aarch64-linux-gnu-gcc
  CC       := $(CROSS_CC)
  AR       := aarch64-linux-gnu-ar
  PKG_CONFIG := PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig pkg-config
endif

# FUZZ=1 (set by `make fuzz`): the library built by clang with libFuzzer's
# coverage, ASan and UBSan; clang-only warnings do not stop a fuzz run.
ifeq ($(FUZZ),1)
  CC     := clang
  BUILD  := build/fuzz
  OPT    := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
            -fno-omit-frame-pointer
  LDSAN  := -fsanitize=address,undefined
else ifeq ($(SANITIZE),1)
  BUILD  := build/san
  OPT    := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
  LDSAN  := -fsanitize=address,undefined
else ifeq ($(TSAN),1)
  BUILD  := build/tsan
  # -Wno-format-truncation: at -O1 with TSan's instrumentation GCC loses the bounds it sees
  # elsewhere and flags snprintf calls into PATH_MAX buffers (engine.c) that cannot truncate.
  OPT    := -O1 -g -fsanitize=thread -fno-omit-frame-pointer -Wno-format-truncation
  LDSAN  := -fsanitize=thread
  # The cases whose code crosses threads: the server (connection threads, worker), streamed
  # expert reads (async I/O, the thread pool) on four families, packs, sessions. Not the whole
  # suite, nor glm-dsa IQ3 or the kill -9 pack resume: minutes under TSan on CI's two cores,
  # and no thread the cases above do not already cover.
  TSAN_SUITES := test_serve_ stream_glm_dsa_rq2k stream_deepseek2 stream_gemma4 stream_qwen3moe \
                 pack_resume pack_streamed pack_bad session_
  T ?= $(TSAN_SUITES)
  # cases that are whole-minute client runs natively (a 12,000-token Codex prefill) skip by name
  TEST_ENV := PETREL_TSAN=1
else ifeq ($(NATIVE),1)
  BUILD  := build/native
  OPT    := -O2 -g -march=native
else ifeq ($(CROSS),aarch64)
  BUILD  := build/arm64$(if $(findstring clang,$(CROSS_CC)),-clang)
  OPT    := -O2 -g
else
  BUILD  := build
  OPT    := -O2 -g
endif

PKGS      := jansson libcrypto libpcre2-8 libmicrohttpd libxxhash
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null || echo -ljansson -lcrypto -lpcre2-8 -lmicrohttpd -lxxhash)
# io_uring (Linux): the expert reader uses it when present, a pread pool otherwise.
ifeq ($(shell $(PKG_CONFIG) --exists liburing 2>/dev/null && echo yes),yes)
  PKG_CFLAGS += -DPT_HAVE_URING $(shell $(PKG_CONFIG) --cflags liburing)
  PKG_LIBS   += $(shell $(PKG_CONFIG) --libs liburing)
endif

# libcurl: `petrel pull` and -hf (src/cli/pull.c) only; linked into the petrel binary alone.
CURL_CFLAGS := $(shell $(PKG_CONFIG) --cflags libcurl 2>/dev/null)
CURL_LIBS   := $(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null || echo -lcurl)
PKG_CFLAGS  += $(CURL_CFLAGS)

# -ffp-contract=off: no compiler-made fused multiply-adds (clang contracts a*b+c by default,
# and every arm64 CPU has FMA): the scalar reference and the NEON kernels round each product,
# as written, so that their bits do not depend on the compiler.
CFLAGS  += -std=c11 $(OPT) -ffp-contract=off -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes -Werror -D_GNU_SOURCE -Iinclude -Isrc $(PKG_CFLAGS) -pthread -MMD -MP
LDLIBS  += $(LDSAN) $(PKG_LIBS) -lm -pthread
ifeq ($(FUZZ),1)
  CFLAGS += -Wno-error
endif

# libpetrel.a is the engine (everything behind include/petrel.h); the front
# ends are not in it: the CLI (src/cli), the server (src/server) and what the
# two share (src/front) link into the petrel binary, and the server and the
# shared part into the test binary too (tests/test_serve.c drives oai.c).
LIB_SRC  := $(wildcard src/*.c src/format/*.c src/kernels/*.c src/model/*.c src/nn/*.c \
                       src/runtime/*.c src/engine/*.c src/text/*.c src/os/*.c)
ifneq ($(ARCH),x86_64)
  LIB_SRC := $(filter-out %_avx2.c %_avx512.c,$(LIB_SRC))
endif
ifneq ($(ARCH),aarch64)
  LIB_SRC := $(filter-out %_neon.c %_dotprod.c %_i8mm.c,$(LIB_SRC))
endif
CLI_SRC  := $(wildcard src/cli/*.c)
FRONT_SRC := $(wildcard src/front/*.c src/server/*.c)
TEST_SRC := $(wildcard tests/*.c)
BENCH_SRC := $(wildcard bench/*.c)
TOOL_SRC  := tools/mkmodel.c tools/belady.c

LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/%.o)
FRONT_OBJ := $(FRONT_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/webui.o
TEST_OBJ  := $(TEST_SRC:%.c=$(BUILD)/%.o)
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/%.o)
TOOL_OBJ  := $(TOOL_SRC:%.c=$(BUILD)/%.o)

# Per-file ISA flags: only these files may use AVX2 / AVX-512 instructions;
# the dispatcher calls into them after checking the CPU at run time.
AVX2_FLAGS   := -mavx2 -mfma -mf16c
AVX512_FLAGS := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
# arm64: the baseline (ARMv8.0 Advanced SIMD) needs no flag; only these files may use the
# ARMv8.2 dot-product (sdot/udot) and ARMv8.6 int8 matrix (smmla) instructions.
DOTPROD_FLAGS := -march=armv8.2-a+dotprod
I8MM_FLAGS    := -march=armv8.2-a+dotprod+i8mm

.PHONY: all native test bench bench-run format format-check clean deps demo build test-run \
        test-full test-arm64 test-arm64-full test-arm64-clang test-arm64-run arm64-icount
# deps runs first, then a fresh make that sees what deps installed (pkg-config
# results above are computed when the Makefile is read).
all: deps
	@$(MAKE) --no-print-directory build

build: $(BUILD)/petrel

native:
	$(MAKE) NATIVE=1 all

deps:
	@sh tools/deps.sh

# The web chat (src/server/web/) as byte arrays in the binary: tools/embed.c, run on the
# build machine (HOSTCC), writes build/gen/webui.c.
WEB_ASSETS := src/server/web/index.html src/server/web/app.js src/server/web/app.css
HOSTCC ?= cc
$(BUILD)/embed: tools/embed.c
	@mkdir -p $(@D)
	$(HOSTCC) -std=c11 -O1 -Wall -Wextra -Werror -o $@ $<

$(BUILD)/gen/webui.c: $(BUILD)/embed $(WEB_ASSETS)
	@mkdir -p $(@D)
	$(BUILD)/embed $@ $(WEB_ASSETS)

$(BUILD)/gen/webui.o: $(BUILD)/gen/webui.c
	$(CC) $(CFLAGS) -Wno-overlength-strings -c -o $@ $<

$(BUILD)/libpetrel.a: $(LIB_OBJ)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^

$(BUILD)/petrel: $(CLI_OBJ) $(FRONT_OBJ) $(BUILD)/libpetrel.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) $(CURL_LIBS)

$(BUILD)/test_petrel: $(TEST_OBJ) $(FRONT_OBJ) $(BUILD)/libpetrel.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench_petrel: $(BENCH_OBJ) $(BUILD)/libpetrel.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# Tokenizer encoding speed (tools/bench_tokenizer.c), run by `make bench`.
$(BUILD)/bench_tokenizer: $(BUILD)/tools/bench_tokenizer.o $(BUILD)/libpetrel.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# Constrained decoding's cost per token (tools/bench_grammar.c), run by `make bench`.
$(BUILD)/bench_grammar: $(BUILD)/tools/bench_grammar.o $(BUILD)/libpetrel.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# Drafting with the MTP head: ceiling (replayed drafts), cost of failure, real acceptance
# (tools/bench_spec.c), run by `make bench` through bench/spec.sh.
$(BUILD)/bench_spec: $(BUILD)/tools/bench_spec.o $(BUILD)/libpetrel.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# Synthetic-model generator (tools/mkmodel.c): writes the glm-dsa GGUF `make bench` runs, and
# header-only real shapes (`--shape glm-5.2 --header-only`) for memory plans (tests/test_plan.c).
$(BUILD)/mkmodel: $(BUILD)/tools/mkmodel.o $(BUILD)/libpetrel.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# Belady bound of a routing trace (tools/belady.c), for the streaming benchmark.
$(BUILD)/belady: $(BUILD)/tools/belady.o $(BUILD)/libpetrel.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# O_DIRECT disk read-bandwidth probe (tools/ioprobe.c), the yardstick of bench/stream.sh.
$(BUILD)/ioprobe: $(BUILD)/tools/ioprobe.o
	$(CC) $(CFLAGS) -o $@ $^ -pthread

$(BUILD)/%_avx2.o: %_avx2.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(AVX2_FLAGS) -c -o $@ $<

$(BUILD)/%_avx512.o: %_avx512.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(AVX512_FLAGS) -c -o $@ $<

$(BUILD)/%_dotprod.o: %_dotprod.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DOTPROD_FLAGS) -c -o $@ $<

$(BUILD)/%_i8mm.o: %_i8mm.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(I8MM_FLAGS) -c -o $@ $<

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

# The test binary finds the CLI at PETREL_BIN for the command-line tests.
test: deps
	@$(MAKE) --no-print-directory test-run

test-run: $(BUILD)/petrel $(BUILD)/test_petrel $(BUILD)/mkmodel
	@$(TEST_ENV) PETREL_BIN=$(BUILD)/petrel PETREL_MKMODEL=$(BUILD)/mkmodel $(BUILD)/test_petrel $(T)

# The long checks: the 12,000-token agent request on every fixture family and the
# 8,000-token exactness references (minutes each).
test-full: $(BUILD)/petrel $(BUILD)/test_petrel $(BUILD)/mkmodel
	@PETREL_TEST_FULL=1 PETREL_BIN=$(BUILD)/petrel PETREL_MKMODEL=$(BUILD)/mkmodel \
		$(BUILD)/test_petrel test_serve_agent_12k exact_long_prompts

# arm64 under qemu-user (Debian: gcc-aarch64-linux-gnu, qemu-user-static, the libraries as
# :arm64 packages; tools/deps-arm64.sh installs them, root). The test binary is cross-built
# into build/arm64 and run once per CPU model, each forcing one kernel level through the
# feature bits qemu reports (dispatch.c reads AT_HWCAP/AT_HWCAP2): cortex-a53 = NEON only,
# neoverse-n1 = + dotprod, max = + i8mm. ARM64_T: the kernel, format and tokenizer suites and,
# per family, one whole-model fixture and its batch-invariance case; `make test-arm64-full`
# runs every model fixture and batchinv case (about 9 minutes per CPU level on two cores).
# QEMU_LD_PREFIX=/ : the guest's loader must be the :arm64 libc6's own
# (/lib/ld-linux-aarch64.so.1); the cross toolchain's copy under /usr/aarch64-linux-gnu is
# another Debian build of glibc, and with it pthread_create and fork spin forever (the two
# disagree on the layout of the loader's private data).
ARM64_CPUS ?= cortex-a53 neoverse-n1 max
ARM64_MODELS := model_deepseek2_q4_k_m model_glm_dsa_rq2k model2_gemma4_q4_k_m \
              model2_qwen3moe_q4_k_m batchinv_deepseek2_q4_k_m batchinv_glm_dsa_rq2k \
              batchinv_gemma4_q4_k_m batchinv_qwen3moe_q4_k_m model_glm_dsa_iq2 model_glm_dsa_iq3 \
              batchinv_glm_dsa_iq2 batchinv_glm_dsa_iq3
ARM64_T    ?= test_kernels simd_ ops_ tok_reference_files tok_special_parsing tok_stream_utf8 \
              tok_invalid_utf8 tok_utf8_repair refvec_ iq_handles iq_tables iq_dot iq_rows \
              gguf_reads_fixtures gguf_fixture_details gguf_hostile_cases $(ARM64_MODELS)
QEMU_ARM64 ?= qemu-aarch64-static
test-arm64:
	@sh tools/deps-arm64.sh
	@$(MAKE) --no-print-directory CROSS=aarch64 build/arm64/test_petrel
	@$(MAKE) --no-print-directory test-arm64-run

test-arm64-full:
	@$(MAKE) --no-print-directory test-arm64 ARM64_T="$(ARM64_T) model batchinv"

# The same suites built by clang (--target=aarch64-linux-gnu, linked against the same :arm64
# libraries), run at one level: the compiler, not the CPU, is what differs.
test-arm64-clang:
	@sh tools/deps-arm64.sh
	@$(MAKE) --no-print-directory CROSS=aarch64 CROSS_CC="clang --target=aarch64-linux-gnu" \
		build/arm64-clang/test_petrel build/arm64-clang/petrel
	@$(MAKE) --no-print-directory test-arm64-run ARM64_BUILD=build/arm64-clang ARM64_CPUS=neoverse-n1

# Instructions per block of every arm64 kernel at each level, counted under qemu
# (bench/arm64_icount.sh, tools/kernel_icount.c; about 2 minutes).
arm64-icount:
	@sh tools/deps-arm64.sh
	@sh bench/arm64_icount.sh

ARM64_BUILD ?= build/arm64
test-arm64-run:
	@for c in $(ARM64_CPUS); do \
	   echo "== qemu-aarch64 -cpu $$c ($(ARM64_BUILD))"; \
	   QEMU_LD_PREFIX=/ $(QEMU_ARM64) -cpu $$c $(ARM64_BUILD)/test_petrel $(ARM64_T) || exit 1; \
	 done

# Fuzzing: every tests/fuzz/fuzz_NAME.c is a libFuzzer target linked against the
# library (and the server's request code) built with FUZZ=1; each runs
# FUZZ_SECONDS from its seed corpus tests/fuzz/corpus/NAME (kept small, in the
# repository), writing what it finds new to build/fuzz/corpus/NAME. The targets
# read fixtures by relative path: run from the repository root.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := gguf request chat_parse xpack grammar
FUZZ_FLAGS   := -max_len=65536 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
.PHONY: fuzz fuzz-ci fuzz-build fuzz-run
fuzz: deps
	@$(MAKE) --no-print-directory FUZZ=1 fuzz-run

fuzz-ci: deps
	@$(MAKE) --no-print-directory FUZZ=1 FUZZ_SECONDS=20 fuzz-run

fuzz-build: $(FUZZ_TARGETS:%=build/fuzz/fuzz_%)

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(BUILD)/src/server/oai.o $(BUILD)/src/front/split.o \
                   $(BUILD)/libpetrel.a
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

fuzz-run: fuzz-build
	@mkdir -p $(FUZZ_TARGETS:%=build/fuzz/corpus/%)
	@cp -u tests/fixtures/tokenizer/ggml-vocab-fixture-*.gguf build/fuzz/corpus/gguf/
	@for t in $(FUZZ_TARGETS); do \
	   echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
	   build/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) $(FUZZ_FLAGS) \
	       -artifact_prefix=build/fuzz/crash-$$t- build/fuzz/corpus/$$t tests/fuzz/corpus/$$t \
	       2>build/fuzz/fuzz_$$t.log || { tail -60 build/fuzz/fuzz_$$t.log; exit 1; }; \
	   grep -E "^stat::(number_of_executed_units|average_exec_per_sec)|^Done" build/fuzz/fuzz_$$t.log; \
	 done

BENCH_STREAM_ARCHS ?= glm-dsa gemma4
bench: deps
	@$(MAKE) --no-print-directory bench-run

bench-run: $(BUILD)/bench_petrel $(BUILD)/petrel $(BUILD)/mkmodel $(BUILD)/belady $(BUILD)/bench_tokenizer \
           $(BUILD)/ioprobe $(BUILD)/bench_grammar $(BUILD)/bench_spec
	$(BUILD)/bench_petrel
	$(BUILD)/bench_tokenizer
	$(BUILD)/bench_grammar $(BENCH_GRAMMAR_MODELS)
	@BUILD=$(BUILD) sh bench/run.sh
	@BUILD=$(BUILD) sh bench/gemm.sh
	@BUILD=$(BUILD) sh bench/inmem.sh
	@BUILD=$(BUILD) sh bench/serve.sh
	@BUILD=$(BUILD) sh bench/spec.sh
	@BUILD=$(BUILD) sh bench/pcache.sh
	@if [ "$(BENCH_STREAM)" = 1 ]; then \
	   for a in $(BENCH_STREAM_ARCHS); do BUILD=$(BUILD) STREAM_ARCH=$$a sh bench/stream.sh || exit 1; done; \
	 else echo "make bench: streaming benchmark skipped (BENCH_STREAM=1 runs bench/stream.sh, root, ~1 h)"; fi
	@if [ "$(BENCH_PROMPT)" = 1 ]; then BUILD=$(BUILD) sh bench/prompt.sh || exit 1; \
	 else echo "make bench: long-prompt benchmark skipped (BENCH_PROMPT=1 runs bench/prompt.sh, root, ~1 h)"; fi
	@if [ "$(BENCH_KVSPILL)" = 1 ]; then BUILD=$(BUILD) sh bench/kvspill.sh || exit 1; \
	 else echo "make bench: KV-beyond-RAM benchmark skipped (BENCH_KVSPILL=1 runs bench/kvspill.sh, root, ~30 min the first time)"; fi

FORMAT_SRC = $$(find include src tests bench tools -name '*.[ch]' -not -path 'tests/fixtures/*' \
               -not -path '*/node_modules/*')
format:
	clang-format -i $(FORMAT_SRC)

# The check `make test` also runs (tests/test_repo.c): fails when a file differs from .clang-format.
format-check:
	clang-format --dry-run -Werror $(FORMAT_SRC)

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(FRONT_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BENCH_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) \
         $(BUILD)/tools/bench_tokenizer.d $(BUILD)/tools/bench_grammar.d $(BUILD)/tools/bench_spec.d

# The README's "run" command: an interactive chat (stdin) on a shipped fixture model until
# issue 8 ships a demo model (tiny random weights: the answers are gibberish, the machinery is
# real). Non-interactive stdin works too: EOF ends the chat cleanly.
DEMO_MODEL ?= models/petrel-demo-glm.gguf
demo: all
	$(BUILD)/petrel chat -m $(DEMO_MODEL) --expert-slots 8 --no-think -n 128

# petrel's greedy output on the demo model against llama.cpp's (LLAMA_CPP_DIR or node-llama-cpp;
# skipped with a message when neither is there). Not part of `make test`.
.PHONY: check-llamacpp
check-llamacpp: all
	@PETREL=$(BUILD)/petrel sh tools/check_llamacpp.sh
