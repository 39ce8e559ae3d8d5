/* webui.h — the web chat's files (src/server/web/), compiled into the binary by tools/embed.c
 * (build/gen/webui.c) and served by server.c at / and /NAME. */
#ifndef PT_SERVER_WEBUI_H
#define PT_SERVER_WEBUI_H

#include <stddef.h>

typedef struct webui_asset {
    const char *path; /* "/index.html", "/app.js", ...; NULL ends the table */
    const char *type; /* Content-Type */
    const unsigned char *data;
    size_t len;
} webui_asset;

extern const webui_asset webui_assets[];

#endif
