# Reduced from benchmarks/fuzz.py: DP704 took `DataParallel(net).to` for a call of it.
import torch.nn as nn

net = nn.Linear(4, 4)
move = nn.DataParallel(net).to
print(nn.DataParallel(net).cuda)
total = nn.DataParallel(net).to + 1
pair = (nn.DataParallel(net).cuda, 1)
