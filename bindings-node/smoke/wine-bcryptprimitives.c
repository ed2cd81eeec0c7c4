/* ProcessPrng for wine 8.0 (Debian 12's), which has no bcryptprimitives.dll: every Windows that
 * Rust supports has it (Rust's standard library takes its random bytes from it, for HashMap
 * keys), so a Rust DLL that imports it does not load there ("Module not found"). make setup-wine
 * builds this with mingw-w64 into the test's wine prefix only; it is never shipped. It answers
 * with RtlGenRandom (advapi32's SystemFunction036), which wine has. */
#include <windows.h>
#include <ntsecapi.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
    if (!RtlGenRandom(data, chunk)) return FALSE;
    data += chunk;
    len -= chunk;
  }
  return TRUE;
}
