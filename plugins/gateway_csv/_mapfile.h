/*
 * _mapfile.h: a read-only memory-mapped file, on POSIX and on Windows.
 *
 * The scanner needs four things of a file: map it whole (never copy it to
 * the heap), read a few bytes at an offset without touching the mapping
 * (pread: searching the mapping for chunk boundaries faulted up to 2 MiB in
 * per touch), tell the kernel a scanned range is no longer needed (so a
 * 2 GB file does not stay resident), and unmap it. This header gives those
 * four for POSIX (open/mmap/pread/madvise) and for Windows
 * (CreateFileW/CreateFileMapping/MapViewOfFile/ReadFile with an OVERLAPPED
 * offset/VirtualUnlock). It does not include Python.h, so the
 * Windows branch is compiled on its own by tests/test_csv_mapfile.py with
 * a MinGW cross-compiler when one is installed.
 *
 * Every function returns 0 on success, or an errno-style code.
 */
#ifndef GATEWAY_CSV_MAPFILE_H
#define GATEWAY_CSV_MAPFILE_H

#include <errno.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#else
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

typedef struct {
#ifdef _WIN32
    HANDLE file;    /* INVALID_HANDLE_VALUE when closed */
    HANDLE mapping; /* NULL when the file is empty or closed */
#else
    int fd; /* -1 when closed */
#endif
    const char *data; /* NULL when the file is empty or closed */
    int64_t size;
} MapFile;

static void mapfile_init(MapFile *m) {
#ifdef _WIN32
    m->file = INVALID_HANDLE_VALUE;
    m->mapping = NULL;
#else
    m->fd = -1;
#endif
    m->data = NULL;
    m->size = 0;
}

static int mapfile_is_open(const MapFile *m) {
#ifdef _WIN32
    return m->file != INVALID_HANDLE_VALUE;
#else
    return m->fd >= 0;
#endif
}

static void mapfile_close(MapFile *m) {
#ifdef _WIN32
    if (m->data) UnmapViewOfFile((LPCVOID)m->data);
    if (m->mapping) CloseHandle(m->mapping);
    if (m->file != INVALID_HANDLE_VALUE) CloseHandle(m->file);
#else
    if (m->data) munmap((void *)m->data, (size_t)m->size);
    if (m->fd >= 0) close(m->fd);
#endif
    mapfile_init(m);
}

#ifdef _WIN32
static int mapfile_winerr(void) {
    switch (GetLastError()) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND: return ENOENT;
    case ERROR_ACCESS_DENIED: return EACCES;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY: return ENOMEM;
    default: return EIO;
    }
}
#endif

/* Opens and maps `path` (UTF-8 on Windows, the file-system encoding
 * elsewhere). A folder is EISDIR; anything else that is not a regular file is
 * EINVAL. An empty file opens with data == NULL. */
static int mapfile_open(MapFile *m, const char *path) {
    mapfile_init(m);
#ifdef _WIN32
    int wide = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, NULL, 0);
    if (wide <= 0) return EINVAL;
    WCHAR *wpath = (WCHAR *)malloc(sizeof(WCHAR) * (size_t)wide);
    if (!wpath) return ENOMEM;
    MultiByteToWideChar(CP_UTF8, 0, path, -1, wpath, wide);
    DWORD attrs = GetFileAttributesW(wpath);
    if (attrs != INVALID_FILE_ATTRIBUTES && (attrs & FILE_ATTRIBUTE_DIRECTORY)) {
        free(wpath);
        return EISDIR;
    }
    /* FILE_SHARE_DELETE too: a writer may replace the file while it is mapped,
     * as on POSIX, where the mapping keeps the old contents */
    m->file = CreateFileW(wpath, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                          NULL, OPEN_EXISTING, FILE_FLAG_SEQUENTIAL_SCAN, NULL);
    free(wpath);
    if (m->file == INVALID_HANDLE_VALUE) return mapfile_winerr();
    if (GetFileType(m->file) != FILE_TYPE_DISK) {
        mapfile_close(m);
        return EINVAL;
    }
    LARGE_INTEGER size;
    if (!GetFileSizeEx(m->file, &size)) {
        int err = mapfile_winerr();
        mapfile_close(m);
        return err;
    }
    m->size = (int64_t)size.QuadPart;
    if (m->size == 0) return 0; /* CreateFileMapping refuses an empty file */
    m->mapping = CreateFileMappingW(m->file, NULL, PAGE_READONLY, 0, 0, NULL);
    if (!m->mapping) {
        int err = mapfile_winerr();
        mapfile_close(m);
        return err;
    }
    m->data = (const char *)MapViewOfFile(m->mapping, FILE_MAP_READ, 0, 0, 0);
    if (!m->data) {
        int err = mapfile_winerr();
        mapfile_close(m);
        return err;
    }
    return 0;
#else
    int fd = open(path, O_RDONLY);
    if (fd < 0) return errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return err;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    }
    m->fd = fd;
    m->size = (int64_t)st.st_size;
    if (m->size == 0) return 0;
    void *p = mmap(NULL, (size_t)m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        int err = errno;
        mapfile_close(m);
        return err;
    }
    madvise(p, (size_t)m->size, MADV_SEQUENTIAL);
    m->data = (const char *)p;
    return 0;
#endif
}

/* Reads up to n bytes at offset into out, through the file, not the mapping;
 * *got is how many were read (fewer at the end of the file). */
static int mapfile_pread(const MapFile *m, char *out, int64_t offset, int64_t n, int64_t *got) {
    *got = 0;
    while (*got < n) {
#ifdef _WIN32
        OVERLAPPED at = {0};
        int64_t pos = offset + *got;
        at.Offset = (DWORD)(pos & 0xFFFFFFFF);
        at.OffsetHigh = (DWORD)(pos >> 32);
        int64_t want64 = n - *got;
        DWORD want = want64 > (1 << 30) ? (DWORD)(1 << 30) : (DWORD)want64;
        DWORD r = 0;
        if (!ReadFile(m->file, out + *got, want, &r, &at)) {
            if (GetLastError() == ERROR_HANDLE_EOF) break;
            return mapfile_winerr();
        }
#else
        ssize_t r = pread(m->fd, out + *got, (size_t)(n - *got), (off_t)(offset + *got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
#endif
        if (r == 0) break;
        *got += (int64_t)r;
    }
    return 0;
}

/* Tells the system that the whole pages in [from, to) of a mapping are not
 * needed again soon (they are read from the file again if they are). */
static void mapfile_release(const char *data, int64_t from, int64_t to) {
    if (!data) return;
#ifdef _WIN32
    SYSTEM_INFO info;
    GetSystemInfo(&info);
    int64_t page = (int64_t)info.dwPageSize;
#else
    int64_t page = (int64_t)sysconf(_SC_PAGESIZE);
#endif
    int64_t a = (from + page - 1) / page * page; /* only pages wholly inside */
    int64_t b = to / page * page;
    if (b <= a) return;
#ifdef _WIN32
    /* a read-only file view's pages are dropped from the working set by
     * unlocking them; VirtualUnlock on unlocked pages does exactly that */
    VirtualUnlock((LPVOID)(data + a), (SIZE_T)(b - a));
#else
    madvise((void *)(data + a), (size_t)(b - a), MADV_DONTNEED);
#endif
}

/* Maps the pages of [from, to) of a mapping before they are read, in one call
 * (Linux 5.14's MADV_POPULATE_READ): reading them otherwise takes a page fault
 * per 64 KiB. In process, csvql's Q01 on the taxi file took 11% less time at
 * 1M rows and 8% at 5M (Q02 5%, Q04 2%) with 8 MiB windows, the scan's
 * release window; 2 MiB windows saved less, 32 MiB ones took 40% longer. Where the call does not exist, or fails (a file cut short: the read
 * then gets the SIGBUS the scan handles), nothing is done. */
static void mapfile_populate(const char *data, int64_t from, int64_t to) {
#if defined(__linux__)
    if (!data) return;
    int64_t page = (int64_t)sysconf(_SC_PAGESIZE);
    int64_t a = from / page * page;
    if (to <= a) return;
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
    madvise((void *)(data + a), (size_t)(to - a), MADV_POPULATE_READ);
#else
    (void)data; (void)from; (void)to;
#endif
}

#endif /* GATEWAY_CSV_MAPFILE_H */
