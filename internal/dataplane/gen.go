package dataplane

// The generated *_bpfel.go and *_bpfel.o files (shortbridge, egre, impair, engines, lan, delay) are committed,
// so building Trellis needs only Go. Regenerating needs clang, llvm-strip and
// libbpf's headers (Debian: clang llvm libbpf-dev); the two -I directories
// give <asm/types.h> to the bpf target, which has no multiarch path of its own.
//
//go:generate go tool bpf2go -tags linux -target bpfel shortbridge bpf/shortbridge.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu -O2 -g -Wall -Werror
//go:generate go tool bpf2go -tags linux -target bpfel egre bpf/egre.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu -O2 -g -Wall -Werror
//go:generate go tool bpf2go -tags linux -target bpfel impair bpf/impair.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu -O2 -g -Wall -Werror
//go:generate go tool bpf2go -tags linux -target bpfel engines bpf/engines.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu -O2 -g -Wall -Werror -mcpu=v3
//go:generate go tool bpf2go -tags linux -target bpfel delay bpf/delay.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu -O2 -g -Wall -Werror
//go:generate go tool bpf2go -tags linux -target bpfel lan bpf/lan.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu -O2 -g -Wall -Werror
