/*
 * bench_distributed.c — tide's all_reduce against a plain MPI_Allreduce on the same buffer (a
 * tensor's memory), in one run: mpirun -np 2 bench_distributed [slices] (bench/README.md). For each size (64 KB to
 * 64 MB of float32) the two alternate slice by slice, so a drift of the machine lands on both; each
 * figure is the median over the slices of a slice's median call. Also prints the bus bandwidth
 * (bytes * 2(n-1)/n per second, the convention of NCCL's tests) and, as the machine's own limit,
 * a STREAM triad that every rank runs at once, as they share the memory during the reduction.
 * Only rank 0 prints.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "tide.h"

#define REPS 9
#define MAX_SLICES 64

static int rank, world;

/* The median seconds of REPS calls of one kind, all ranks starting together. */
static double time_calls(bool use_tide, tide_tensor *t, float *raw, int n)
{
    double v[REPS];
    for (int r = 0; r < REPS; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_seconds();
        if (use_tide) {
            if (tide_all_reduce_(t, TIDE_REDUCE_SUM) < 0) {
                fprintf(stderr, "all_reduce: %s\n", tide_last_error());
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        } else {
            MPI_Allreduce(MPI_IN_PLACE, raw, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        v[r] = now_seconds() - t0;
    }
    return median_of(v, REPS);
}

/* GB/s of a = b + s*c over n floats, all ranks at once: the best of 5. */
static double triad_gbs(size_t n)
{
    float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        a[i] = 0, b[i] = 1, c[i] = 2;
    double best = 1e30;
    for (int k = 0; k < 5; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_seconds();
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] + 3.0f * c[i];
        double dt = now_seconds() - t0;
        best = dt < best ? dt : best;
    }
    volatile float sink = a[n / 2];
    (void)sink;
    free(a), free(b), free(c);
    return 12.0 * (double)n / best / 1e9;
}

static void one_size(int kb, int slices)
{
    int n = kb * 256;
    int64_t shape[1] = {n};
    tide_tensor *t = tide_zeros(1, shape, TIDE_FLOAT32);
    float *raw = tide_mutable_data_ptr(t); /* the same buffer for both */
    double mpi[MAX_SLICES], mine[MAX_SLICES];
    for (int s = 0; s < slices; s++) {
        bool tide_first = s % 2;
        double a = time_calls(tide_first, t, raw, n);
        double b = time_calls(!tide_first, t, raw, n);
        mine[s] = tide_first ? a : b;
        mpi[s] = tide_first ? b : a;
    }
    double m = median_of(mpi, slices), o = median_of(mine, slices);
    double bytes = (double)n * 4 * 2 * (world - 1) / world;
    if (rank == 0) {
        printf("all_reduce_%dKB_mpi: %.3f ms\n", kb, m * 1e3);
        printf("all_reduce_%dKB_tide: %.3f ms\n", kb, o * 1e3);
        printf("all_reduce_%dKB_overhead: %.3f ratio (tide / MPI_Allreduce%s)\n", kb, o / m,
               kb < 1024 ? "" : o / m <= 1.10 ? "; target <= 1.10: met" : "; target <= 1.10: NOT met");
        printf("all_reduce_%dKB_busbw: %.2f GB/s\n", kb, bytes / o / 1e9);
    }
    tide_release(t);
}

int main(int argc, char **argv)
{
    int slices = argc > 1 ? atoi(argv[1]) : 5;
    slices = slices < 1 ? 1 : slices > MAX_SLICES ? MAX_SLICES : slices;
    if (tide_dist_init(0) < 0) { /* MPI_Init_thread happens here */
        fprintf(stderr, "%s\n", tide_last_error());
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (rank == 0) {
        print_cpu_model();
        printf("ranks: %d on one machine, %d slices of %d calls per figure\n", world, slices, REPS);
    }
    double triad = triad_gbs((size_t)32 << 20);
    if (rank == 0)
        printf("stream_triad_all_ranks: %.2f GB/s per rank\n", triad);
    for (int kb = 64; kb <= 65536; kb *= 4) /* 64 KB (a small bucket) to 64 MB */
        one_size(kb, slices);
    return 0;
}
