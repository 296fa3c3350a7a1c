#include "textflag.h"

DATA expConst<>+0x00(SB)/4, $89.0               // input clamp, above ln(MaxFloat32)
DATA expConst<>+0x04(SB)/4, $-104.0             // input clamp, below ln(2^-149)
DATA expConst<>+0x08(SB)/4, $1.44269504088896341 // log2(e)
DATA expConst<>+0x0c(SB)/4, $0.693359375        // ln 2 = c1 - c2
DATA expConst<>+0x10(SB)/4, $-2.12194440e-4     // c2
DATA expConst<>+0x14(SB)/4, $0.5
DATA expConst<>+0x18(SB)/4, $-103.27892990343185 // ln(2^-149): below it, e^x is 0
DATA expConst<>+0x1c(SB)/4, $1.0
DATA expConst<>+0x20(SB)/4, $1.9875691500e-4    // polynomial, highest degree first
DATA expConst<>+0x24(SB)/4, $1.3981999507e-3
DATA expConst<>+0x28(SB)/4, $8.3334519073e-3
DATA expConst<>+0x2c(SB)/4, $4.1665795894e-2
DATA expConst<>+0x30(SB)/4, $1.6666665459e-1
DATA expConst<>+0x34(SB)/4, $5.0000001201e-1
DATA expConst<>+0x38(SB)/4, $127                // float32 exponent bias (int32)
DATA expConst<>+0x3c(SB)/4, $0x80000000         // float32 sign bit
GLOBL expConst<>(SB), RODATA|NOPTR, $64

// EXP sets Y6 = e^Y0 (8 lanes), with the constants loaded by EXPCONST in Y8-Y15; it uses Y1-Y5 and Y7.
#define EXPCONST \
	VBROADCASTSS expConst<>+0x00(SB), Y8; \
	VBROADCASTSS expConst<>+0x04(SB), Y9; \
	VBROADCASTSS expConst<>+0x08(SB), Y10; \
	VBROADCASTSS expConst<>+0x0c(SB), Y11; \
	VBROADCASTSS expConst<>+0x10(SB), Y12; \
	VBROADCASTSS expConst<>+0x14(SB), Y13; \
	VBROADCASTSS expConst<>+0x18(SB), Y14; \
	VBROADCASTSS expConst<>+0x1c(SB), Y15

#define EXP \
	VMINPS  Y8, Y0, Y1; /* y = min(x, 89) */ \
	VMAXPS  Y9, Y1, Y1; /* y = max(y, -104) */ \
	VCMPPS  $1, Y14, Y0, Y5; /* x < ln(2^-149): the result is 0 (set at the end), so ... */ \
	VANDNPS Y1, Y5, Y1; /* ... y = 0 there: no subnormal intermediates, whose microcode assists cost 10x */ \
	VMOVAPS Y13, Y2; \
	VFMADD231PS Y10, Y1, Y2; /* t = y*log2e + 0.5 */ \
	VROUNDPS $1, Y2, Y2; /* n = floor(t) */ \
	VFNMADD231PS Y11, Y2, Y1; /* r = y - n*c1 */ \
	VFNMADD231PS Y12, Y2, Y1; /* r -= n*c2 */ \
	VBROADCASTSS expConst<>+0x20(SB), Y3; \
	VBROADCASTSS expConst<>+0x24(SB), Y4; \
	VFMADD213PS Y4, Y1, Y3; /* p = p*r + c */ \
	VBROADCASTSS expConst<>+0x28(SB), Y4; \
	VFMADD213PS Y4, Y1, Y3; \
	VBROADCASTSS expConst<>+0x2c(SB), Y4; \
	VFMADD213PS Y4, Y1, Y3; \
	VBROADCASTSS expConst<>+0x30(SB), Y4; \
	VFMADD213PS Y4, Y1, Y3; \
	VBROADCASTSS expConst<>+0x34(SB), Y4; \
	VFMADD213PS Y4, Y1, Y3; \
	VMULPS  Y1, Y1, Y5; /* z = r*r */ \
	VADDPS  Y15, Y1, Y6; /* r + 1 */ \
	VFMADD231PS Y5, Y3, Y6; /* e = p*z + r + 1 */ \
	VCVTPS2DQ Y2, Y2; \
	VPSRAD  $1, Y2, Y3; /* n1 = n>>1 */ \
	VPSUBD  Y3, Y2, Y4; /* n2 = n - n1 */ \
	VPBROADCASTD expConst<>+0x38(SB), Y7; \
	VPADDD  Y7, Y3, Y3; \
	VPSLLD  $23, Y3, Y3; /* 2^n1 */ \
	VPADDD  Y7, Y4, Y4; \
	VPSLLD  $23, Y4, Y4; /* 2^n2 */ \
	VMULPS  Y3, Y6, Y6; \
	VMULPS  Y4, Y6, Y6; \
	VCMPPS  $1, Y14, Y0, Y5; /* x < ln(2^-149), -Inf too: 0 */ \
	VANDNPS Y6, Y5, Y6; \
	VCMPPS  $3, Y0, Y0, Y5; /* NaN: NaN */ \
	VBLENDVPS Y5, Y0, Y6, Y6

// e * 2^n is computed as e * 2^n1 * 2^n2 with n1 = n>>1, n2 = n-n1: both factors stay normal floats from n = -150
// to 129, so subnormal results round once and large ones overflow to +Inf.

// func expAVX2(o, x []float32)
TEXT ·expAVX2(SB), NOSPLIT, $0-48
	MOVQ o_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ x_len+32(FP), CX
	SHRQ $3, CX
	JZ   expdone
	EXPCONST

exploop:
	VMOVUPS (SI), Y0
	EXP
	VMOVUPS Y6, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     exploop

expdone:
	VZEROUPPER
	RET

// func logisticAVX2(o, x []float32): o = 1/(1+e) where x >= 0 and e/(1+e) where x < 0 (the sign bit set), with
// e = e^-|x|, over len(x) &^ 7 elements.
TEXT ·logisticAVX2(SB), NOSPLIT, $0-48
	MOVQ o_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ x_len+32(FP), CX
	SHRQ $3, CX
	JZ   logdone
	EXPCONST

logloop:
	VBROADCASTSS expConst<>+0x3c(SB), Y1
	VMOVUPS (SI), Y0
	VORPS   Y1, Y0, Y0         // -|x|
	EXP                        // Y6 = e
	VADDPS  Y15, Y6, Y2        // 1 + e
	VDIVPS  Y2, Y15, Y3        // 1/(1+e)
	VDIVPS  Y2, Y6, Y4         // e/(1+e)
	VMOVUPS (SI), Y0
	VBLENDVPS Y0, Y4, Y3, Y3   // by x's sign bit
	VMOVUPS Y3, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     logloop

logdone:
	VZEROUPPER
	RET

// BINARY defines func NAME(o, a, b []float32): o[i] = a[i] OP b[i] over len(o) &^ 7 elements. The jumps count
// instructions: JZ skips the 8-instruction loop, JNZ returns to its first instruction.
#define BINARY(NAME, OP) \
TEXT NAME(SB), NOSPLIT, $0-72; \
	MOVQ o_base+0(FP), DI; \
	MOVQ o_len+8(FP), CX; \
	MOVQ a_base+24(FP), SI; \
	MOVQ b_base+48(FP), DX; \
	SHRQ $3, CX; \
	JZ   9(PC); \
	VMOVUPS (SI), Y0; \
	OP      (DX), Y0, Y0; \
	VMOVUPS Y0, (DI); \
	ADDQ    $32, SI; \
	ADDQ    $32, DX; \
	ADDQ    $32, DI; \
	DECQ    CX; \
	JNZ     -7(PC); \
	VZEROUPPER; \
	RET

BINARY(·addAVX2, VADDPS)
BINARY(·subAVX2, VSUBPS)
BINARY(·mulAVX2, VMULPS)
BINARY(·divAVX2, VDIVPS)

// func fillAVX2(o []float32, v float32): o[i] = v over len(o) &^ 7 elements.
TEXT ·fillAVX2(SB), NOSPLIT, $0-28
	MOVQ o_base+0(FP), DI
	MOVQ o_len+8(FP), CX
	VBROADCASTSS v+24(FP), Y0
	SHRQ $3, CX
	JZ   filldone

fillloop:
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	DECQ    CX
	JNZ     fillloop

filldone:
	VZEROUPPER
	RET

// func sumAVX2(x []float32) float32: the sum of x's first len(x) &^ 31 elements, in 32 interleaved partial sums.
TEXT ·sumAVX2(SB), NOSPLIT, $0-28
	MOVQ   x_base+0(FP), SI
	MOVQ   x_len+8(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	SHRQ   $5, CX
	JZ     sumfold

sumloop:
	VADDPS (SI), Y0, Y0
	VADDPS 32(SI), Y1, Y1
	VADDPS 64(SI), Y2, Y2
	VADDPS 96(SI), Y3, Y3
	ADDQ   $128, SI
	DECQ   CX
	JNZ    sumloop

sumfold:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	MOVSS        X0, ret+24(FP)
	VZEROUPPER
	RET
