// HeadTile is a block's place in the grid of the attention kernels: block
// blockIdx.x is tile `tile` of the `tiles` tiles of `rows` rows (or keys)
// that cover T, for batch b and query head h, whose kv head is kh (NH/NKV
// query heads a kv head); tiles vary fastest, then heads, then the batch.
// Included by kernels.cu and flash_mma.cuh (so by the CPU emulator too).
#pragma once

struct HeadTile {
    int tiles, tile, b, h, kh;
    __device__ HeadTile(int T, int rows, int NH, int NKV) {
        tiles = (T + rows - 1) / rows;
        tile = (int)(blockIdx.x % tiles);
        int bh = blockIdx.x / tiles;
        b = bh / NH;
        h = bh % NH;
        kh = h / (NH / NKV);
    }
};
