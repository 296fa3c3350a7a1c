// sgemm measures the machine's float32 matrix-multiplication ceiling with OpenBLAS (cblas_sgemm), the baseline
// of model's training benchmark. Usage: sgemm M N K ITERS; prints GFLOP/s (best of ITERS after a warm-up).
// Build: gcc -O2 sgemm.c -o sgemm -lopenblas
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
	if (argc != 5) {
		fprintf(stderr, "usage: sgemm M N K ITERS\n");
		return 2;
	}
	int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]), iters = atoi(argv[4]);
	float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n), *c = malloc(sizeof(float) * m * n);
	for (long i = 0; i < (long)m * k; i++) a[i] = (float)(i % 7) * 0.1f;
	for (long i = 0; i < (long)k * n; i++) b[i] = (float)(i % 5) * 0.1f;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, a, k, b, k, 0, c, n);
	double best = 1e30;
	for (int it = 0; it < iters; it++) {
		double t0 = now();
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, a, k, b, k, 0, c, n);
		double dt = now() - t0;
		if (dt < best) best = dt;
	}
	printf("%.3f\n", 2.0 * m * n * k / best / 1e9);
	return 0;
}
