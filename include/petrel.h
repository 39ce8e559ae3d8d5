/* petrel.h — the public interface of the petrel inference engine.
 *
 * petrel runs Mixture-of-Experts language models far larger than memory: the
 * dense part stays resident, routed experts are streamed from the SSD into a
 * bounded cache. Front ends (CLI, server) use only this header; tensors, the
 * expert cache and the kernels stay behind it.
 *
 * So far the engine exposes its version; the model/session API (pt_engine,
 * pt_session) arrives with the forward pass.
 */
#ifndef PETREL_H
#define PETREL_H

#define PETREL_VERSION "0.1.0"

/* The library version, "MAJOR.MINOR.PATCH". */
const char *pt_version(void);

#endif
