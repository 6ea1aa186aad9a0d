/*
 * datadir.c - the data directory's lock and files (see datadir.h).
 */
#define _GNU_SOURCE
#include "datadir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "tablefile.h"

int datadir_lock(const char *dir, char *err, size_t errlen)
{
    if (mkdir(dir, 0750) == 0)
        log_info("created data-dir %s", dir);
    else if (errno != EEXIST) {
        snprintf(err, errlen, "cannot create data-dir %s: %s", dir, strerror(errno));
        return -1;
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, DATADIR_LOCK);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\r\n")] = '\0';
        if (e == EWOULDBLOCK)
            snprintf(err, errlen,
                     "data-dir %s is in use by another floed%s%s%s (it holds %s): stop it, or give this one another "
                     "--data-dir",
                     dir, pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "", path);
        else
            snprintf(err, errlen, "cannot lock %s: %s", path, strerror(e));
        close(fd);
        return -1;
    }
    char text[32];
    int len = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len)
        log_warn("cannot write the pid into %s: %s", path, strerror(errno));
    return fd;
}

/* Calls fn(dir, name, arg) for every entry of dir whose name contains `part`;
 * stops at the first non-zero return and returns it. */
static int each_file(const char *dir, const char *part, int (*fn)(const char *, const char *, void *), void *arg)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d)))
        if (strstr(de->d_name, part))
            rc = fn(dir, de->d_name, arg);
    closedir(d);
    return rc;
}

static int remove_temporary(const char *dir, const char *name, void *arg)
{
    (void)arg;
    char path[1200];
    struct stat sb;
    if (!floe_file_is_temporary(name, DATADIR_SUFFIX)) /* a table's file may hold the mark in its name */
        return 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return 0;
    if (unlink(path) == 0)
        log_warn("removed %s (%lld bytes): a snapshot that an earlier floed did not finish", path,
                 (long long)sb.st_size);
    else
        log_warn("cannot remove the unfinished snapshot %s: %s", path, strerror(errno));
    return 0;
}

void datadir_remove_temporaries(const char *dir)
{
    each_file(dir, DATADIR_SUFFIX ".tmp.", remove_temporary, NULL);
}

typedef struct {
    char *err;
    size_t errlen;
} damaged_arg;

static int report_damaged(const char *dir, const char *name, void *arg)
{
    damaged_arg *a = arg;
    size_t len = strlen(name), sl = strlen(DATADIR_DAMAGED);
    if (len < sl || strcmp(name + len - sl, DATADIR_DAMAGED) != 0)
        return 0;
    snprintf(a->err, a->errlen,
             "%s/%s is a damaged snapshot of table %.*s, set aside at an earlier start; floed will not start while it "
             "is there: move it out of the data-dir (after restoring a good copy as %s/%.*s, if you have one; "
             "otherwise floed starts without that table)",
             dir, name, (int)(len - sl - strlen(DATADIR_SUFFIX)), name, dir, (int)(len - sl), name);
    return -1;
}

int datadir_check_damaged(const char *dir, char *err, size_t errlen)
{
    damaged_arg a = {err, errlen};
    return each_file(dir, DATADIR_DAMAGED, report_damaged, &a);
}

int datadir_set_aside(const char *path)
{
    char aside[1300];
    snprintf(aside, sizeof aside, "%s%s", path, DATADIR_DAMAGED);
    return rename(path, aside);
}

char *datadir_table_path(const char *dir, const char *name)
{
    char *path;
    return floe_asprintf(&path, "%s/%s%s", dir, name, DATADIR_SUFFIX) < 0 ? NULL : path;
}
